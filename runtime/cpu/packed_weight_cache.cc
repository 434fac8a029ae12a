#include "runtime/cpu/packed_weight_cache.h"

#include <atomic>
#include <list>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

namespace kiln::runtime::cpu {
namespace {

constexpr int64_t kMaxBytes = int64_t{512} << 20;  // packed weights kept at most
constexpr size_t kMaxSeen = 4096;                  // matrices remembered as seen once

struct KeyHash {
  size_t operator()(const PackedWeightKey& k) const {
    return absl::HashOf(k.data, k.version, k.rows, k.cols, k.row_stride, k.col_stride, k.element,
                        k.panel_width);
  }
};

class Cache {
 public:
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
    if (bytes > kMaxBytes) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_.contains(key)) return;  // another thread packed it too
    seen_.erase(key);
    lru_.emplace_front(key, std::move(packed));
    kept_[key] = lru_.begin();
    stats_.bytes += bytes;
    while (stats_.bytes > kMaxBytes) evict_oldest();
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
    stats_ = {};
    transient_packs_ = 0;
  }

 private:
  using Entry = std::pair<PackedWeightKey, PackedMatrix>;

  void remember(const PackedWeightKey& key) {
    if (seen_.size() >= kMaxSeen) seen_.clear();  // forget the lot rather than track age
    seen_.insert(key);
  }

  void evict_oldest() {
    const Entry& oldest = lru_.back();
    stats_.bytes -= static_cast<int64_t>(oldest.second->size() * sizeof(float));
    kept_.erase(oldest.first);
    lru_.pop_back();
  }

  std::mutex mutex_;
  std::list<Entry> lru_;
  absl::flat_hash_map<PackedWeightKey, std::list<Entry>::iterator, KeyHash> kept_;
  absl::flat_hash_set<PackedWeightKey, KeyHash> seen_;
  PackedWeightStats stats_;
  std::atomic<int64_t> transient_packs_{0};  // counted without the lock: attention packs often
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: kernels may run during exit
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
