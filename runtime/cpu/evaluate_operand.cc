// evaluate_operand (tile_evaluator.h): an anchor's operand evaluated whole, tile by tile on
// all cores, for the families that need it as one array (a GEMM's prologue, a norm's weight,
// a concat's part).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/cpu/tile_evaluator.h"
#include "runtime/cpu/view_runs.h"

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

template <class T>
void evaluate_operand_into(const KernelProgram& program, const KernelLaunch& launch,
                           const std::vector<const base::Buffer*>& inputs,
                           const std::vector<double>& params, int k, const jit::ViewParams& place,
                           T* dst) {
  const int space = k + 1;
  const ops::Shape& shape = launch.spaces[space];
  const int instr = program.anchor_operands[k];
  const int64_t total = ops::numel(shape);
  const int64_t step = shape.empty() ? 1 : place.strides.back();
  // Long rows are tiled row by row, so that no tile spans two rows: the loads of offset
  // slices (a stencil's neighbours) are then one run each and read in place.
  const int64_t row = shape.empty() ? 1 : shape.back();
  const bool by_rows = shape.size() >= 2 && row >= kTile / 4;
  const int64_t tiles_per_row = by_rows ? (row + kTile - 1) / kTile : 1;
  const int64_t tiles = by_rows ? total / row * tiles_per_row : (total + kTile - 1) / kTile;
  base::parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t begin = t * kTile, n = std::min(kTile, total - begin);
      if (by_rows) {
        const int64_t within = t % tiles_per_row * kTile;
        begin = t / tiles_per_row * row + within;
        n = std::min(kTile, row - within);
      }
      ev.run(space, begin, n);
      ev.visit(instr, [&](const auto* src) {
        if (shape.empty()) {
          dst[place.offset] = static_cast<T>(src[0]);
          return;
        }
        for_each_run(shape, place, begin, n, [&](int64_t e, int64_t run, int64_t base) {
          T* out = dst + base;
          if (step == 1) {
            for (int64_t j = 0; j < run; ++j) out[j] = static_cast<T>(src[e + j]);
          } else {
            for (int64_t j = 0; j < run; ++j) out[j * step] = static_cast<T>(src[e + j]);
          }
        });
      });
    }
  });
}

#define KILN_EVALUATE_OPERAND_INTO(T)                                                     \
  template void evaluate_operand_into<T>(                                                 \
      const KernelProgram&, const KernelLaunch&, const std::vector<const base::Buffer*>&, \
      const std::vector<double>&, int, const jit::ViewParams&, T*);
KILN_EVALUATE_OPERAND_INTO(float)
KILN_EVALUATE_OPERAND_INTO(double)
KILN_EVALUATE_OPERAND_INTO(int64_t)
#undef KILN_EVALUATE_OPERAND_INTO

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
