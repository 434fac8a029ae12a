#include "base/stats_counters.h"
#include "kiln/debug.h"

namespace kiln {
Stats stats() {
  const base::Counters& c = base::counters();
  Stats s;
  s.syncs = c.syncs;
  s.plans_built = c.plans_built;
  s.plan_cache_hits = c.plan_cache_hits;
  s.kernels_compiled = c.kernels_compiled;
  s.kernel_cache_hits = c.kernel_cache_hits;
  s.disk_cache_hits = c.disk_cache_hits;
  s.kernels_launched = c.kernels_launched;
  s.bytes_allocated = c.bytes_allocated;
  s.compiled_records = c.compiled_records;
  s.compiled_replays = c.compiled_replays;
  s.packed_weight_evictions = c.packed_weight_evictions;
  return s;
}

void reset_stats() {
  base::Counters& c = base::counters();
  for (std::atomic<int64_t>* counter :
       {&c.syncs, &c.plans_built, &c.plan_cache_hits, &c.kernels_compiled, &c.kernel_cache_hits,
        &c.disk_cache_hits, &c.kernels_launched, &c.bytes_allocated, &c.compiled_records,
        &c.compiled_replays, &c.packed_weight_evictions}) {
    counter->store(0);
  }
}

}  // namespace kiln
