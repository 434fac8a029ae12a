// Row norm kernels: softmax, log_softmax, layer_norm and rms_norm along one axis.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "base/thread_pool.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/row_reductions.h"
#include "runtime/cpu/row_walk.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu/simd_row_norm.h"

namespace kiln::runtime::cpu {
namespace {

using jit::KernelLaunch;
using jit::KernelProgram;
using ops::OpKind;

// One row of a row norm: `x` holds the row (contiguous), `y` receives the result.
template <class T>
void norm_row(OpKind op, const T* x, T* y, int64_t extent, int64_t stride, const T* w, const T* b,
              double eps, T* scratch) {
  if (op == OpKind::Softmax || op == OpKind::LogSoftmax) {
    T max = row_max(x, extent, stride);  // NaN is skipped here and poisons the sum below
    if (std::isinf(max)) max = 0;
    for (int64_t k = 0; k < extent; ++k) scratch[k] = x[k * stride] - max;
    if constexpr (std::is_same_v<T, float>) {
      simd_exp(scratch, scratch, static_cast<size_t>(extent));
    } else {
      for (int64_t k = 0; k < extent; ++k) scratch[k] = std::exp(scratch[k]);
    }
    const double total = row_sum(scratch, extent, 1, [](T v) { return v; });
    if (op == OpKind::Softmax) {
      const T scale = static_cast<T>(1.0 / total);
      for (int64_t k = 0; k < extent; ++k) y[k * stride] = scratch[k] * scale;
    } else {
      // (x - max) - log(sum), never x - (max + log(sum)): near a large max the sum's log
      // would be rounded away in the shift.
      const T log_sum = static_cast<T>(std::log(total));
      for (int64_t k = 0; k < extent; ++k) y[k * stride] = (x[k * stride] - max) - log_sum;
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) {  // the common case: a contiguous row, in the CPU's widest vectors
      simd_norm_row(x, y, extent, w, b, eps, op == OpKind::LayerNorm);
      return;
    }
  }
  const double mean = op == OpKind::LayerNorm ? row_sum(x, extent, stride, [](T v) { return v; }) /
                                                    static_cast<double>(extent)
                                              : 0.0;
  const double sq = row_sum(x, extent, stride, [center = static_cast<T>(mean)](T v) {
    return (v - center) * (v - center);
  });
  const T scale = static_cast<T>(1.0 / std::sqrt(sq / static_cast<double>(extent) + eps));
  const T shift = static_cast<T>(op == OpKind::LayerNorm ? mean : 0.0);
  if (op == OpKind::LayerNorm) {
    for (int64_t k = 0; k < extent; ++k)
      y[k * stride] = (x[k * stride] - shift) * scale * w[k] + b[k];
  } else {
    for (int64_t k = 0; k < extent; ++k) y[k * stride] = x[k * stride] * scale * w[k];
  }
}

// A norm's weight and bias (empty where the op has none) and its epsilon.
template <class T>
struct NormOperands {
  std::vector<T> w, b;
  double eps = 0.0;
};

template <class T>
NormOperands<T> norm_operands(const KernelProgram& program, const KernelLaunch& launch,
                              const std::vector<const base::Buffer*>& inputs,
                              const std::vector<double>& params) {
  NormOperands<T> n;
  if (program.anchor_operands.size() > 1) {
    n.w = evaluate_operand<T>(program, launch, inputs, params, 1);
  }
  if (program.anchor_operands.size() > 2) {
    n.b = evaluate_operand<T>(program, launch, inputs, params, 2);
  }
  n.eps = program.anchor_param >= 0 ? params[program.anchor_param] : 0.0;
  return n;
}

// softmax / log_softmax / layer_norm / rms_norm along the anchor axis, in T.
template <class T>
void row_norm(const KernelProgram& program, const KernelLaunch& launch,
              const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
              T* result) {
  const NormOperands<T> norm = norm_operands<T>(program, launch, inputs, params);
  const jit::RowShape rows = jit::row_norm_shape(program, launch);
  // Lowering casts the operand to the anchor's dtype, whose register class is T.
  for_each_row<T>(program, launch, inputs, params, [&](const T* x, int64_t stride, int64_t r) {
    thread_local std::vector<T> scratch;
    scratch.resize(rows.extent);
    norm_row<T>(program.anchor_op, x, result + row_start(r, rows.extent, rows.inner), rows.extent,
                stride, norm.w.data(), norm.b.data(), norm.eps, scratch.data());
  });
}

// row_norm for rows along the last axis whose result is not stored as it is (a 16-bit
// output, or an epilogue after the norm): rows go in chunks, and each chunk's epilogue runs
// right after it while it is in cache. The result then never becomes a whole float tensor,
// whose allocation, page faults and second pass over memory cost more than the norm itself.
template <class T>
void row_norm_chunked(const KernelProgram& program, const KernelLaunch& launch,
                      const std::vector<const base::Buffer*>& inputs,
                      const std::vector<base::Buffer*>& outputs,
                      const std::vector<double>& params) {
  const NormOperands<T> norm = norm_operands<T>(program, launch, inputs, params);
  const jit::RowShape rows = jit::row_norm_shape(program, launch);
  const int64_t extent = rows.extent, outer = rows.outer;
  if (extent == 0 || outer == 0) return;
  const int operand = program.anchor_operands[0];
  const int64_t chunk_rows = std::max<int64_t>(1, 16384 / extent);
  const int64_t chunks = (outer + chunk_rows - 1) / chunk_rows;
  const int64_t group_rows = std::max<int64_t>(1, kTile / extent);
  base::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    thread_local std::vector<T> part, scratch;
    scratch.resize(extent);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * chunk_rows, r1 = std::min(outer, r0 + chunk_rows);
      part.resize((r1 - r0) * extent);
      // The operand of a few rows per evaluator pass (rows are contiguous in space 1), as
      // many as fit a tile, then each row's norm.
      for (int64_t g0 = r0; g0 < r1; g0 += group_rows) {
        const int64_t g1 = std::min(r1, g0 + group_rows);
        ev.run(1, g0 * extent, (g1 - g0) * extent);
        const T* x = ev.template values<T>(operand);
        for (int64_t r = g0; r < g1; ++r) {
          norm_row<T>(program.anchor_op, x + (r - g0) * extent, part.data() + (r - r0) * extent,
                      extent, 1, norm.w.data(), norm.b.data(), norm.eps, scratch.data());
        }
      }
      run_epilogue(program, launch, inputs, outputs, params, part.data(), r0 * extent, r1 * extent);
    }
  });
}

}  // namespace

void run_row_norm(const KernelProgram& program, const KernelLaunch& launch,
                  const std::vector<const base::Buffer*>& inputs,
                  const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  if (register_class(program.anchor_dtype) == RegisterClass::kFloat &&
      !anchor_writes_output<float>(program) && jit::row_norm_shape(program, launch).inner == 1) {
    row_norm_chunked<float>(program, launch, inputs, outputs, params);
    return;
  }
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    if constexpr (std::is_floating_point_v<T>) row_norm<T>(program, launch, inputs, params, result);
  });
}

}  // namespace kiln::runtime::cpu
