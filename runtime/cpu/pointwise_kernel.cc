// Pointwise kernels, and the epilogue every anchored kernel ends with: space 0 over tiles,
// each tile stored to every output. A large pointwise kernel the code generator compiles
// runs as one compiled loop instead (compiled_pointwise.h).
#include <algorithm>

#include "base/thread_pool.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {

void run_pointwise(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const base::Buffer*>& inputs,
                   const std::vector<base::Buffer*>& outputs, const std::vector<double>& params,
                   const void* anchor) {
  if (anchor == nullptr && run_compiled_pointwise(program, launch, inputs, outputs, params)) {
    return;
  }
  run_pointwise_range(program, launch, inputs, outputs, params, anchor, 0, 0,
                      ops::numel(launch.spaces[0]));
}

void run_pointwise_range(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                         const std::vector<const base::Buffer*>& inputs,
                         const std::vector<base::Buffer*>& outputs,
                         const std::vector<double>& params, const void* anchor,
                         int64_t anchor_origin, int64_t begin, int64_t end, int anchor_instr) {
  const int64_t tiles = (end - begin + kTile - 1) / kTile;
  base::parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, anchor);
    ev.set_anchor_origin(anchor_origin);
    ev.read_as_anchor(anchor_instr);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t at = begin + t * kTile, n = std::min(kTile, end - at);
      ev.run(0, at, n);
      for (const jit::Store& s : program.stores) {
        ev.store(s.value, *outputs[s.output], program.output_dtypes[s.output], at, n);
      }
    }
  });
}

}  // namespace kiln::runtime::cpu
