// Pointwise kernels, and the epilogue every anchored kernel ends with: space 0 over tiles,
// each tile stored to every output.
#include <algorithm>

#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/tile_evaluator.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime::cpu {

void run_pointwise(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                   const std::vector<double>& params, const void* anchor) {
  const int64_t total = ops::numel(launch.spaces[0]);
  const int64_t tiles = (total + kTile - 1) / kTile;
  parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, anchor);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
      ev.run(0, begin, n);
      for (const jit::Store& s : program.stores) {
        ev.store(s.value, *outputs[s.output], program.output_dtypes[s.output], begin, n);
      }
    }
  });
}

}  // namespace kiln::runtime::cpu
