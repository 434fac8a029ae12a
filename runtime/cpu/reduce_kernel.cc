// Reduce kernels: sum/mean/max/min and argmax/argmin of the anchor's operand over the
// reduced axes. A large f32 argmin or argmax along a rank-2 space's last dim that the code
// generator compiles runs as one compiled loop (compiled_arg_reduce.h).
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "ops/scalar_math.h"
#include "runtime/cpu/compiled_arg_reduce.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/simd_column_sum.h"
#include "runtime/cpu/simd_row_best.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {
namespace {

using jit::KernelLaunch;
using jit::KernelProgram;
using ops::OpKind;
using ops::Shape;

// Whether `axes` (sorted) are exactly the last axes of a rank-`rank` space.
bool trailing_axes(const std::vector<int>& axes, int rank) {
  if (axes.empty()) return false;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != rank - static_cast<int>(axes.size()) + static_cast<int>(i)) return false;
  }
  return true;
}

// A contiguous run summed in double with eight independent accumulators (the additions
// pipeline and vectorize; double keeps the result as accurate as a sequential sum).
template <class T>
double sum_in_double(const T* x, int64_t n) {
  double acc[8] = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[k + j]);
  }
  for (; k < n; ++k) acc[0] += static_cast<double>(x[k]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Calls row_fn(r, row) for each of the `rows` outputs of a reduction over trailing axes,
// `row` pointing at its `extent` operand values, contiguous. Threads take whole rows; a
// tile of rows is evaluated per evaluator run, so short rows share the run's cost.
template <class RowFn>
void for_each_row(const KernelProgram& program, const KernelLaunch& launch,
                  const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
                  int64_t rows, int64_t extent, RowFn row_fn) {
  const int operand = program.anchor_operands[0];
  const int64_t rows_per_run = std::max<int64_t>(1, kTile / extent);
  const int64_t grain = std::max<int64_t>(rows_per_run, 16384 / extent);
  base::parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t r = r0; r < r1; r += rows_per_run) {
      const int64_t run = std::min(rows_per_run, r1 - r);
      ev.run(1, r * extent, run * extent);
      ev.visit(operand, [&](auto* v) {
        for (int64_t i = 0; i < run; ++i) row_fn(r + i, v + i * extent);
      });
    }
  });
}

// The largest (or smallest) of a row and the position of its first occurrence; the first
// NaN when the row has one (NaN propagates). f32 rows scan in vectors; others in two passes
// without data-dependent branches in the first (it vectorizes): the best value and whether
// a NaN occurs, then where it is.
template <class Acc, class T>
std::pair<Acc, int64_t> best_in_row(const T* row, int64_t n, bool want_max) {
  if constexpr (std::is_same_v<T, float>) {
    const int64_t at = simd_first_best_in_row(row, n, want_max);
    return {static_cast<Acc>(row[at]), at};
  } else {
    Acc best = static_cast<Acc>(row[0]);
    bool nan = false;
    for (int64_t k = 1; k < n; ++k) {
      const Acc x = static_cast<Acc>(row[k]);
      if constexpr (std::is_floating_point_v<Acc>) nan |= x != x;
      best = want_max ? (x > best ? x : best) : (x < best ? x : best);
    }
    if constexpr (std::is_floating_point_v<Acc>) {
      if (nan || best != best) {
        for (int64_t k = 0; k < n; ++k) {
          if (row[k] != row[k]) return {static_cast<Acc>(row[k]), k};
        }
      }
    }
    for (int64_t k = 0; k < n; ++k) {
      if (static_cast<Acc>(row[k]) == best) return {best, k};
    }
    return {best, 0};
  }
}

// A space seen as [outer, rows, inner] where the reduced dims are the middle block and
// inner > 1: a column sum ([rows, inner] summed over rows) or a sum over a middle axis,
// e.g. a mean over the sequence of [batch, sequence, hidden].
struct ColumnBlock {
  int64_t outer = 1, rows = 1, inner = 1;
};

std::optional<ColumnBlock> column_block(const jit::ReductionAxes& dims, const Shape& space) {
  const std::vector<int>& reduced = dims.reduced;
  if (reduced.empty()) return std::nullopt;
  for (size_t i = 1; i < reduced.size(); ++i) {
    if (reduced[i] != reduced[0] + static_cast<int>(i)) return std::nullopt;
  }
  ColumnBlock block;
  for (int d = 0; d < static_cast<int>(space.size()); ++d) {
    int64_t& part = d < reduced.front()   ? block.outer
                    : d <= reduced.back() ? block.rows
                                          : block.inner;
    part *= space[d];
  }
  // Below a few thousand elements per outer block a task is mostly overhead; the scatter
  // path takes those in shared tiles.
  if (block.inner <= 1 || block.rows * block.inner < 4096) return std::nullopt;
  return block;
}

// Positions of whole rows a column-sum task evaluates at once (64 KiB of floats).
constexpr int64_t kColumnSumRun = 16384;

// Floating sums of a column block: an output's inputs lie a row apart, so rather than scatter
// each element into its output, a task adds whole rows of a chunk of columns into double
// accumulators (which vectorize and stay in cache). When outer blocks × column chunks are too
// few to keep every core busy, the rows split too, into partial sums merged in row order.
template <class Result>
void sum_column_block(const KernelProgram& program, const KernelLaunch& launch,
                      const std::vector<const base::Buffer*>& inputs,
                      const std::vector<double>& params, const ColumnBlock& block, bool mean,
                      Result* result) {
  const int64_t inner = block.inner, rows = block.rows;
  const int64_t width = inner <= 8192 ? inner : 4096;
  const int64_t chunks = (inner + width - 1) / width, columns = block.outer * chunks;
  const int64_t wanted = 4 * static_cast<int64_t>(base::worker_count());
  const int64_t splits =
      std::clamp<int64_t>((wanted + columns - 1) / columns, 1, std::max<int64_t>(1, rows / 64));
  const int64_t rows_per_split = (rows + splits - 1) / splits;
  std::vector<double> partial(columns * splits * width, 0.0);
  const int operand = program.anchor_operands[0];
  base::parallel_for(columns * splits, 1, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t column = t / splits, split = t % splits;
      const int64_t o = column / chunks, c0 = (column % chunks) * width;
      const int64_t cw = std::min(width, inner - c0);
      const int64_t r0 = split * rows_per_split, r1 = std::min(rows, r0 + rows_per_split);
      double* acc = partial.data() + t * width;
      // Whole rows (cw == inner) are evaluated several to a run (a plain load reads them
      // in place), so that the accumulators stay in registers across several rows.
      const int64_t per_run = cw == inner ? std::max<int64_t>(1, kColumnSumRun / inner) : 1;
      for (int64_t r = r0; r < r1; r += per_run) {
        const int64_t n = std::min(per_run, r1 - r);
        ev.run(1, (o * rows + r) * inner + c0, cw == inner ? n * inner : cw);
        ev.visit(operand, [&](auto* v) {
          if constexpr (std::is_same_v<std::remove_const_t<std::remove_pointer_t<decltype(v)>>,
                                       float>) {
            simd_add_rows_to_doubles(v, n, inner, cw, acc);
          } else {
            for (int64_t i = 0; i < n; ++i) {
              for (int64_t j = 0; j < cw; ++j) acc[j] += static_cast<double>(v[i * inner + j]);
            }
          }
        });
      }
    }
  });
  const double divisor = mean ? static_cast<double>(rows) : 1.0;
  for (int64_t column = 0; column < columns; ++column) {
    const int64_t o = column / chunks, c0 = (column % chunks) * width;
    const int64_t cw = std::min(width, inner - c0);
    for (int64_t j = 0; j < cw; ++j) {
      double total = 0;
      for (int64_t s = 0; s < splits; ++s) total += partial[(column * splits + s) * width + j];
      result[o * inner + c0 + j] = static_cast<Result>(total / divisor);
    }
  }
}

// Sum/mean/max/min (and argmax/argmin) of operand 0 over the reduced axes, into `result`.
template <class Acc, class Result>
void reduce(const KernelProgram& program, const KernelLaunch& launch,
            const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
            Result* result) {
  const Shape& space = launch.spaces[1];
  const int64_t out_n = ops::numel(launch.spaces[0]);
  const std::vector<int>& axes = program.anchor_attrs.axes;
  const bool arg = program.anchor == jit::AnchorKind::kArgReduce;
  // Output position of each input element (reduced dims stride 0), and, for arg-reductions,
  // its index along the axis.
  const jit::ReductionAxes dims = jit::reduction_axes(program, static_cast<int>(space.size()));
  jit::ViewParams to_out, along_axis;
  {
    Shape kept;
    for (int d : dims.kept) kept.push_back(space[d]);
    std::vector<int64_t> ks = ops::contiguous_strides(kept);
    size_t k = 0;
    for (size_t d = 0; d < space.size(); ++d) {
      const bool reduced = dims.is_reduced[d];
      to_out.strides.push_back(reduced ? 0 : ks[k++]);
      along_axis.strides.push_back(arg && reduced ? 1 : 0);
    }
  }
  const OpKind op = program.anchor_op;
  const bool is_sum = op == OpKind::Sum || op == OpKind::Mean;
  const bool want_max = op == OpKind::Max || op == OpKind::Argmax;
  if constexpr (std::is_floating_point_v<Acc>) {
    // Floating sums over the trailing axes: each output is one contiguous run of the
    // operand, so rows go to threads whole and add with independent accumulators instead
    // of scattering every element into its output. Short rows (a sum over 2 coordinates)
    // are evaluated a tile of rows at a time, so the evaluator's cost per run is shared.
    const int64_t extent = jit::reduced_extent(launch);
    if (!arg && is_sum && trailing_axes(axes, static_cast<int>(space.size())) && extent > 0 &&
        extent <= (int64_t{1} << 16)) {
      for_each_row(program, launch, inputs, params, out_n, extent, [&](int64_t r, auto* row) {
        const double total = sum_in_double(row, extent);
        result[r] =
            static_cast<Result>(op == OpKind::Mean ? total / static_cast<double>(extent) : total);
      });
      return;
    }
    if (!arg && is_sum) {
      if (const std::optional<ColumnBlock> block = column_block(dims, space)) {
        sum_column_block(program, launch, inputs, params, *block, op == OpKind::Mean, result);
        return;
      }
    }
  }
  struct Partial {
    std::vector<Acc> value;
    std::vector<int64_t> index;
    std::vector<char> seen;
  };
  const int64_t total = ops::numel(space);
  const int64_t tiles = (total + kTile - 1) / kTile;
  const int threads =
      static_cast<int>(std::min<int64_t>(base::worker_count(), std::max<int64_t>(1, tiles / 16)));
  std::vector<Partial> partials(threads);
  const int operand = program.anchor_operands[0];
  auto better = [&](Acc v, Acc best) {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (std::isnan(best)) return false;
      if (std::isnan(v)) return true;
    }
    return want_max ? v > best : v < best;
  };
  // Max, min and their positions over the trailing axes: each output scans its own
  // contiguous run in order, so the first NaN, else the first best element, wins, as the
  // scatter below gives by merging in element order; a tile of rows per evaluator run.
  if (const int64_t extent = jit::reduced_extent(launch);
      !is_sum && trailing_axes(dims.reduced, static_cast<int>(space.size())) && extent > 0 &&
      extent <= (int64_t{1} << 16)) {
    for_each_row(program, launch, inputs, params, out_n, extent, [&](int64_t r, auto* row) {
      const auto [best, at] = best_in_row<Acc>(row, extent, want_max);
      result[r] = arg ? static_cast<Result>(at) : static_cast<Result>(best);
    });
    return;
  }
  base::parallel_for(threads, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      Partial& part = partials[w];
      part.value.assign(out_n, Acc{});
      part.index.assign(arg ? out_n : 0, 0);
      part.seen.assign(out_n, 0);
      TileEvaluator ev(program, launch, inputs, params, nullptr);
      std::vector<int64_t> out_off(kTile), axis_off(kTile);
      const int64_t per = (tiles + threads - 1) / threads;
      for (int64_t t = w * per; t < std::min(tiles, (w + 1) * per); ++t) {
        const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
        ev.run(1, begin, n);
        view_offsets(space, to_out, begin, n, out_off.data());
        if (arg) view_offsets(space, along_axis, begin, n, axis_off.data());
        auto accumulate = [&](auto* v) {
          for (int64_t e = 0; e < n; ++e) {
            const int64_t o = out_off[e];
            const Acc x = static_cast<Acc>(v[e]);
            if (is_sum) {
              if constexpr (std::is_floating_point_v<Acc>) {
                part.value[o] += x;
              } else {
                part.value[o] = math::wrapping_add(part.value[o], x);
              }
            } else if (!part.seen[o] || better(x, part.value[o])) {
              part.value[o] = x;
              if (arg) part.index[o] = axis_off[e];
            }
            part.seen[o] = 1;
          }
        };
        ev.visit(operand, accumulate);
      }
    }
  });
  // Merge in thread order: earlier threads hold earlier elements, so ties keep the first.
  Partial& merged = partials[0];
  for (int w = 1; w < threads; ++w) {
    for (int64_t o = 0; o < out_n; ++o) {
      const Partial& part = partials[w];
      if (!part.seen[o]) continue;
      if (is_sum) {
        if constexpr (std::is_floating_point_v<Acc>) {
          merged.value[o] += part.value[o];
        } else {
          merged.value[o] = math::wrapping_add(merged.value[o], part.value[o]);
        }
      } else if (!merged.seen[o] || better(part.value[o], merged.value[o])) {
        merged.value[o] = part.value[o];
        if (arg) merged.index[o] = part.index[o];
      }
      merged.seen[o] = 1;
    }
  }
  const int64_t extent = jit::reduced_extent(launch);
  for (int64_t o = 0; o < out_n; ++o) {
    if (arg) {
      result[o] = static_cast<Result>(merged.index[o]);
    } else if (op == OpKind::Mean) {
      result[o] =
          static_cast<Result>(static_cast<double>(merged.value[o]) / static_cast<double>(extent));
    } else {
      result[o] = static_cast<Result>(merged.value[o]);
    }
  }
}

}  // namespace

void run_reduce(const KernelProgram& program, const KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    if constexpr (std::is_same_v<T, int64_t>) {  // an argmin or argmax over short rows
      if (program.anchor == jit::AnchorKind::kArgReduce &&
          run_compiled_arg_reduce(program, launch, inputs, params, result)) {
        return;
      }
    }
    const RegisterClass operand = register_class(program.instrs[program.anchor_operands[0]].dtype);
    if (operand == RegisterClass::kInt) {
      reduce<int64_t, T>(program, launch, inputs, params, result);
    } else {
      reduce<double, T>(program, launch, inputs, params, result);
    }
  });
}

}  // namespace kiln::runtime::cpu
