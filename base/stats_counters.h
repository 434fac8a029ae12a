// The process-wide counters behind kiln::stats(); atomics so any thread may bump them.
#ifndef KILN_BASE_STATS_COUNTERS_H_
#define KILN_BASE_STATS_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace kiln::base {

struct Counters {
  std::atomic<int64_t> syncs{0};
  std::atomic<int64_t> plans_built{0};
  std::atomic<int64_t> plan_cache_hits{0};
  std::atomic<int64_t> kernels_compiled{0};
  std::atomic<int64_t> kernel_cache_hits{0};
  std::atomic<int64_t> disk_cache_hits{0};
  std::atomic<int64_t> kernels_launched{0};
  std::atomic<int64_t> bytes_allocated{0};
  std::atomic<int64_t> compiled_records{0};
  std::atomic<int64_t> compiled_replays{0};
  std::atomic<int64_t> packed_weight_evictions{0};
};

Counters& counters();

}  // namespace kiln::base

#endif  // KILN_BASE_STATS_COUNTERS_H_
