#include "jit/graph/sync_claims.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "kiln/error.h"

namespace kiln::jit {
namespace {

// Guards every node's claimed_by, and the walks that read a pending node's inputs to decide
// what to claim.
std::mutex& claims_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

// Signalled whenever a sync gives its nodes back.
std::condition_variable& claims_released() {
  static auto* released = new std::condition_variable();
  return *released;
}

// The claims the calling thread holds now (more than one only for a sync inside a sync).
thread_local std::vector<const ClaimedGraph*> claims_of_this_thread;

enum class Walk { kClaimed, kBusy };

// Claims every pending node `roots` reach for `claim`, or none when one of them is another
// sync's (then returns kBusy with `*holder` set to that sync). Each node is claimed when
// first reached, so it is visited, and held, once. Called under claims_mutex().
Walk try_claim(const std::vector<detail::Node*>& roots, const ClaimedGraph* claim,
               std::vector<detail::Node*>& claimed,
               std::vector<std::shared_ptr<detail::Node>>& held, const void** holder) {
  enum class Reached { kNewlyClaimed, kSkipped, kBusy };
  std::vector<detail::Node*> stack;
  auto reach = [&](detail::Node* n) {
    if (n->claimed_by == claim) return Reached::kSkipped;
    if (n->claimed_by != nullptr) {  // another sync's: its thread may be realizing it now
      *holder = n->claimed_by;
      return Reached::kBusy;
    }
    if (n->realized()) return Reached::kSkipped;
    n->claimed_by = claim;
    claimed.push_back(n);
    stack.push_back(n);
    return Reached::kNewlyClaimed;
  };
  auto give_back = [&] {
    for (detail::Node* c : claimed) c->claimed_by = nullptr;
    claimed.clear();
    held.clear();
    return Walk::kBusy;
  };
  for (detail::Node* root : roots) {
    if (reach(root) == Reached::kBusy) return give_back();
  }
  while (!stack.empty()) {
    detail::Node* n = stack.back();
    stack.pop_back();
    for (const std::shared_ptr<detail::Node>& in : n->inputs) {
      const Reached r = reach(in.get());
      if (r == Reached::kBusy) return give_back();
      // A computed leaf is never held: an extra reference would keep update_slice from
      // writing it in place (jit::donatable_inputs counts them).
      if (r == Reached::kNewlyClaimed) held.push_back(in);
    }
  }
  return Walk::kClaimed;
}

}  // namespace

ClaimedGraph::ClaimedGraph(const std::vector<detail::Node*>& roots) {
  std::unique_lock<std::mutex> lock(claims_mutex());
  while (true) {
    const void* holder = nullptr;
    if (try_claim(roots, this, claimed_, held_, &holder) == Walk::kClaimed) break;
    if (std::find(claims_of_this_thread.begin(), claims_of_this_thread.end(), holder) !=
        claims_of_this_thread.end()) {
      throw Error(
          "[sync] a sync started while this thread's own sync is computing a value it needs "
          "(from a custom function or kernel?); it would wait for itself");
    }
    claims_released().wait(lock);
  }
  claims_of_this_thread.push_back(this);
}

ClaimedGraph::~ClaimedGraph() {
  {
    std::lock_guard<std::mutex> lock(claims_mutex());
    for (detail::Node* n : claimed_) n->claimed_by = nullptr;
    std::erase(claims_of_this_thread, this);
  }
  claims_released().notify_all();
  // held_ goes here, outside the lock: dropping the last reference to a chain of nodes
  // destroys them.
}

int64_t count_pending_nodes(detail::Node* root, int64_t limit) {
  std::lock_guard<std::mutex> lock(claims_mutex());
  std::vector<detail::Node*> stack{root};
  absl::flat_hash_set<detail::Node*> seen{root};
  int64_t count = 0;
  while (!stack.empty() && count <= limit) {
    detail::Node* node = stack.back();
    stack.pop_back();
    if (node->claimed_by != nullptr) {  // being computed: one node, soon a leaf
      ++count;
      continue;
    }
    if (node->realized()) continue;
    ++count;
    for (const auto& input : node->inputs) {
      if (seen.insert(input.get()).second) stack.push_back(input.get());
    }
  }
  return count;
}

}  // namespace kiln::jit
