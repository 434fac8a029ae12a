#include "jit/fusion/plan_cache.h"

#include <cstdlib>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "base/stats_counters.h"

namespace kiln::jit {
namespace {

struct Key {
  std::vector<int64_t> tokens;
  size_t hash;
  bool operator==(const Key& o) const { return hash == o.hash && tokens == o.tokens; }
  template <class H>
  friend H AbslHashValue(H h, const Key& k) {
    return H::combine(std::move(h), k.hash);
  }
};

class PlanCache {
 public:
  std::shared_ptr<const LaunchPlan> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
    return it->second->second;
  }
  void add(const Key& key, std::shared_ptr<const LaunchPlan> plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.contains(key)) return;
    lru_.emplace_front(key, std::move(plan));
    index_.emplace(key, lru_.begin());
    while (lru_.size() > plan_cache_capacity()) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lru_.size();
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<const LaunchPlan>>;
  std::mutex mutex_;
  std::list<Entry> lru_;
  absl::flat_hash_map<Key, std::list<Entry>::iterator> index_;
};

PlanCache& cache() {
  static PlanCache instance;
  return instance;
}

Key make_key(const Trace& trace, Device device) {
  Key key{trace.key, 0};
  key.tokens.push_back(static_cast<int64_t>(device.type));
  key.tokens.push_back(device.index);
  key.hash = trace.key_hash ^ (static_cast<size_t>(device.type) * 0x9E3779B97F4A7C15ull) ^
             static_cast<size_t>(device.index);
  return key;
}

}  // namespace

size_t plan_cache_capacity() {
  static const size_t capacity = [] {
    const char* env = std::getenv("KILN_PLAN_CACHE_SIZE");
    size_t value = 0;
    return env != nullptr && absl::SimpleAtoi(env, &value) && value > 0 ? value : size_t{512};
  }();
  return capacity;
}

std::shared_ptr<const LaunchPlan> find_plan(const Trace& trace, Device device) {
  return cache().find(make_key(trace, device));
}

void add_plan(const Trace& trace, Device device, std::shared_ptr<const LaunchPlan> plan) {
  cache().add(make_key(trace, device), std::move(plan));
}

size_t plan_cache_size() { return cache().size(); }

std::shared_ptr<const LaunchPlan> find_or_build_plan(const Trace& trace, Device device, bool* hit) {
  std::shared_ptr<const LaunchPlan> plan = find_plan(trace, device);
  *hit = plan != nullptr;
  if (*hit) return plan;
  plan = build_plan(trace);
  base::counters().plans_built += 1;
  add_plan(trace, device, plan);
  return plan;
}

}  // namespace kiln::jit
