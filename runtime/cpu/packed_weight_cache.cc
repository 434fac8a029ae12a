#include "runtime/cpu/packed_weight_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "base/buffer_contents_observer.h"
#include "base/stats_counters.h"
#include "kiln/debug.h"

namespace kiln::runtime::cpu {
namespace {

constexpr size_t kMaxSeen = 4096;  // matrices remembered as seen once

// KILN_PACKED_WEIGHT_MB, else half of the machine's memory: a model's weights are packed
// once and kept while their tensors live. (A fixed 512 MiB once made a 513 MiB model
// repack one layer on every decode step.)
int64_t default_budget() {
  if (const char* mb = std::getenv("KILN_PACKED_WEIGHT_MB"); mb != nullptr && *mb != '\0') {
    int64_t value = 0;
    if (absl::SimpleAtoi(mb, &value) && value >= 0) return value << 20;
    std::fprintf(stderr, "kiln: ignoring KILN_PACKED_WEIGHT_MB=%s (not a number of MiB)\n", mb);
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return int64_t{1} << 30;
  return static_cast<int64_t>(pages) * page / 2;
}

struct KeyHash {
  size_t operator()(const PackedWeightKey& k) const {
    return absl::HashOf(k.data, k.version, k.rows, k.cols, k.row_stride, k.col_stride, k.element,
                        k.panel_width, k.quantized_format);
  }
};

// Packed Bs by what they were made from. An entry lives until its source's contents are
// gone (the tensor freed, or its buffer written again: Buffer's contents-dropped observer)
// or, past the budget, until it is the least recently used.
class Cache {
 public:
  Cache() : budget_(default_budget()) {}

  PackedMatrix find(const PackedWeightKey& key, bool* keep) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = kept_.find(key); it != kept_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
      ++stats_.hits;
      return it->second->second;
    }
    ++stats_.packs;
    *keep = seen_.contains(key);
    if (!*keep) remember(key);
    return nullptr;
  }

  void keep(const PackedWeightKey& key, PackedMatrix packed) {
    const int64_t bytes = static_cast<int64_t>(packed->size() * sizeof(float));
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes > budget_) return;
    if (kept_.contains(key)) return;  // another thread packed it too
    seen_.erase(key);
    lru_.emplace_front(key, std::move(packed));
    kept_[key] = lru_.begin();
    by_version_[key.version].push_back(key);
    kept_count_.store(static_cast<int64_t>(kept_.size()), std::memory_order_relaxed);
    stats_.bytes += bytes;
    while (stats_.bytes > budget_) evict_oldest();
  }

  // The contents of `version` are gone: what was packed from them goes too.
  void forget(uint64_t version) {
    if (kept_count_.load(std::memory_order_relaxed) == 0) return;  // the usual case: quick
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_version_.find(version);
    if (it == by_version_.end()) return;
    for (const PackedWeightKey& key : it->second) {
      auto entry = kept_.find(key);
      if (entry == kept_.end()) continue;
      drop(entry->second);
    }
    by_version_.erase(it);
  }

  void set_budget(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    budget_ = std::max<int64_t>(0, bytes);
    while (stats_.bytes > budget_ && !lru_.empty()) evict_oldest();
  }

  int64_t budget() {
    std::lock_guard<std::mutex> lock(mutex_);
    return budget_;
  }

  void count_transient() { transient_packs_.fetch_add(1, std::memory_order_relaxed); }

  PackedWeightStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    PackedWeightStats s = stats_;
    s.packs += transient_packs_.load(std::memory_order_relaxed);
    s.entries = static_cast<int64_t>(kept_.size());
    return s;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.clear();
    lru_.clear();
    seen_.clear();
    by_version_.clear();
    kept_count_ = 0;
    stats_ = {};
    transient_packs_ = 0;
  }

 private:
  using Entry = std::pair<PackedWeightKey, PackedMatrix>;

  void remember(const PackedWeightKey& key) {
    if (seen_.size() >= kMaxSeen) seen_.clear();  // forget the lot rather than track age
    seen_.insert(key);
  }

  // The packed copy goes at once; the version's list keeps a key that no longer finds one.
  void drop(std::list<Entry>::iterator entry) {
    stats_.bytes -= static_cast<int64_t>(entry->second->size() * sizeof(float));
    kept_.erase(entry->first);
    lru_.erase(entry);
    kept_count_.store(static_cast<int64_t>(kept_.size()), std::memory_order_relaxed);
  }

  void evict_oldest() {
    const PackedWeightKey key = lru_.back().first;
    drop(std::prev(lru_.end()));
    auto it = by_version_.find(key.version);
    if (it != by_version_.end()) {
      std::erase(it->second, key);
      if (it->second.empty()) by_version_.erase(it);
    }
    base::counters().packed_weight_evictions += 1;
  }

  std::mutex mutex_;
  std::list<Entry> lru_;
  absl::flat_hash_map<PackedWeightKey, std::list<Entry>::iterator, KeyHash> kept_;
  absl::flat_hash_set<PackedWeightKey, KeyHash> seen_;
  absl::flat_hash_map<uint64_t, std::vector<PackedWeightKey>> by_version_;
  std::atomic<int64_t> kept_count_{0};  // read without the lock by forget()
  int64_t budget_;
  PackedWeightStats stats_;
  std::atomic<int64_t> transient_packs_{0};  // counted without the lock: attention packs often
};

Cache& cache() {
  static Cache* c = [] {
    auto* made = new Cache;  // never destroyed: kernels may run during exit
    base::set_contents_dropped_observer([](uint64_t version) { cache().forget(version); });
    return made;
  }();
  return *c;
}

}  // namespace

PackedMatrix find_packed_weight(const PackedWeightKey& key, bool* keep) {
  return cache().find(key, keep);
}
void keep_packed_weight(const PackedWeightKey& key, PackedMatrix packed) {
  cache().keep(key, std::move(packed));
}
void count_transient_pack() { cache().count_transient(); }
PackedWeightStats packed_weight_stats() { return cache().stats(); }
void clear_packed_weights() { cache().clear(); }

}  // namespace kiln::runtime::cpu

namespace kiln {

void set_packed_weight_budget(int64_t bytes) { runtime::cpu::cache().set_budget(bytes); }
int64_t packed_weight_budget() { return runtime::cpu::cache().budget(); }

}  // namespace kiln
