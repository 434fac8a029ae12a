// The process groups this process belongs to, by id: what a collective op's `group`
// attribute names. Id 0 is the world, opened on first use: every process that mpirun (or
// another MPI launcher) started, over MPI; or this process alone when it was started by
// itself, with no library needed. Groups live as long as the process.
#ifndef KILN_COMM_GROUP_REGISTRY_H_
#define KILN_COMM_GROUP_REGISTRY_H_

#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"

namespace kiln::comm {

struct GroupInfo {
  std::shared_ptr<Communicator> communicator;
  std::vector<int> world_ranks;  // the world rank of each of the group's ranks, in order
};

inline constexpr int kWorldGroup = 0;

// Opens the world on first call (throws kiln::Error when MPI is needed and cannot be
// loaded) and returns its id, kWorldGroup.
int open_world();
// The group `id`; throws kiln::Error for an id that names no group of this process.
const GroupInfo& group_info(int id);
// The id of the sub-group that `color` and `key` select within group `parent`
// (Communicator::split: collective over `parent`).
int split_group(int parent, int color, int key);
// The group of this process whose ranks are `world_ranks`, if one was opened.
std::optional<int> find_group(const std::vector<int>& world_ranks);

}  // namespace kiln::comm

#endif  // KILN_COMM_GROUP_REGISTRY_H_
