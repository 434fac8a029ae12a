// The plan cache: canonical trace key (and device) -> launch plan, bounded with LRU eviction.
// A hit skips planning and lowering entirely.
#ifndef KILN_JIT_FUSION_PLAN_CACHE_H_
#define KILN_JIT_FUSION_PLAN_CACHE_H_

#include <memory>

#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/dtype.h"

namespace kiln::jit {

// The cached plan for `trace` on `device`, or nullptr.
std::shared_ptr<const LaunchPlan> find_plan(const Trace& trace, Device device);
void add_plan(const Trace& trace, Device device, std::shared_ptr<const LaunchPlan> plan);
// The cached plan for `trace`, or a new one built, counted (Stats::plans_built) and cached.
// `*hit` says which.
std::shared_ptr<const LaunchPlan> find_or_build_plan(const Trace& trace, Device device, bool* hit);
// KILN_PLAN_CACHE_SIZE (default 512) plans at most; the least recently used goes first.
size_t plan_cache_capacity();
size_t plan_cache_size();

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_PLAN_CACHE_H_
