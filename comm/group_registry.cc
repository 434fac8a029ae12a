#include "comm/group_registry.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/mpi_communicator.h"
#include "comm/single_process_communicator.h"
#include "kiln/error.h"

namespace kiln::comm {
namespace {

struct Registry {
  std::mutex mutex;
  // Entries are never removed, and a deque-like vector of pointers keeps references valid.
  std::vector<std::unique_ptr<GroupInfo>> groups;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: groups outlive every static
  return *r;
}

std::unique_ptr<Communicator> open_world_communicator() {
  if (launched_as_several_processes()) return open_mpi_world();
  return std::make_unique<SingleProcessCommunicator>();
}

// Every rank's world rank, gathered over `comm`.
std::vector<int> gather_world_ranks(Communicator& comm, int my_world_rank) {
  std::vector<int> ranks(static_cast<size_t>(comm.size()));
  comm.all_gather(&my_world_rank, ranks.data(), sizeof(int));
  return ranks;
}

int add_group(Registry& r, std::shared_ptr<Communicator> comm, std::vector<int> world_ranks) {
  auto info = std::make_unique<GroupInfo>();
  info->communicator = std::move(comm);
  info->world_ranks = std::move(world_ranks);
  r.groups.push_back(std::move(info));
  return static_cast<int>(r.groups.size()) - 1;
}

}  // namespace

int open_world() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.groups.empty()) {
    std::shared_ptr<Communicator> world = open_world_communicator();
    std::vector<int> ranks(static_cast<size_t>(world->size()));
    for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int>(i);
    add_group(r, std::move(world), std::move(ranks));
  }
  return kWorldGroup;
}

const GroupInfo& group_info(int id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (id < 0 || id >= static_cast<int>(r.groups.size())) {
    throw Error(absl::StrCat("[distributed] no process group has id ", id,
                             " in this process (groups come from kiln::distributed::init and "
                             "Group::split)"));
  }
  return *r.groups[static_cast<size_t>(id)];
}

int split_group(int parent, int color, int key) {
  const GroupInfo& p = group_info(parent);
  const int my_world_rank = p.world_ranks[static_cast<size_t>(p.communicator->rank())];
  std::shared_ptr<Communicator> comm = p.communicator->split(color, key);
  std::vector<int> world_ranks = gather_world_ranks(*comm, my_world_rank);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return add_group(r, std::move(comm), std::move(world_ranks));
}

std::optional<int> find_group(const std::vector<int>& world_ranks) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t i = 0; i < r.groups.size(); ++i) {
    if (r.groups[i]->world_ranks == world_ranks) return static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace kiln::comm
