// evaluate_operand (tile_evaluator.h): an anchor's operand evaluated whole, tile by tile on
// all cores, for the families that need it as one array (a GEMM's prologue, a norm's weight,
// a concat's part).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {

namespace {
using jit::KernelLaunch;
using jit::KernelProgram;
}  // namespace

template <class T>
std::vector<T> evaluate_operand(const KernelProgram& program, const KernelLaunch& launch,
                                const std::vector<const base::Buffer*>& inputs,
                                const std::vector<double>& params, int k) {
  const int space = k + 1;
  const int instr = program.anchor_operands[k];
  const int64_t total = ops::numel(launch.spaces[space]);
  std::vector<T> values(total);
  const int64_t tiles = (total + kTile - 1) / kTile;
  base::parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
      ev.run(space, begin, n);
      ev.visit(instr, [&](const auto* src) {
        for (int64_t e = 0; e < n; ++e) values[begin + e] = static_cast<T>(src[e]);
      });
    }
  });
  return values;
}

template std::vector<float> evaluate_operand<float>(const KernelProgram&, const KernelLaunch&,
                                                    const std::vector<const base::Buffer*>&,
                                                    const std::vector<double>&, int);
template std::vector<double> evaluate_operand<double>(const KernelProgram&, const KernelLaunch&,
                                                      const std::vector<const base::Buffer*>&,
                                                      const std::vector<double>&, int);
template std::vector<int64_t> evaluate_operand<int64_t>(const KernelProgram&, const KernelLaunch&,
                                                        const std::vector<const base::Buffer*>&,
                                                        const std::vector<double>&, int);

}  // namespace kiln::runtime::cpu
