// A row's sum and max in the scalar loops the row norms (row_norm_kernel.cc) and the f64
// online softmax of attention (attention_kernel.cc) share. Private to runtime/cpu; f32 rows
// of contiguous values take the Highway versions (simd_row_norm.h, simd_math.h) instead.
#ifndef KILN_RUNTIME_CPU_ROW_REDUCTIONS_H_
#define KILN_RUNTIME_CPU_ROW_REDUCTIONS_H_

#include <algorithm>
#include <cstdint>
#include <limits>

namespace kiln::runtime::cpu {

// The sum of term(x[k * stride]) over k < n, with eight independent accumulators so the
// additions pipeline (and, for unit stride, vectorize). f32 rows add in f32 within blocks
// of 512 elements and in double across blocks: the error stays near double's while the
// work stays in SIMD registers.
template <class T, class F>
double row_sum(const T* x, int64_t n, int64_t stride, F&& term) {
  double total = 0;
  constexpr int64_t kBlock = 512;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    T acc[8] = {};
    int64_t k = begin;
    for (; k + 8 <= end; k += 8) {
      for (int j = 0; j < 8; ++j) acc[j] += term(x[(k + j) * stride]);
    }
    for (; k < end; ++k) acc[0] += term(x[k * stride]);
    total += static_cast<double>((acc[0] + acc[1]) + (acc[2] + acc[3])) +
             static_cast<double>((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }
  return total;
}

// The largest x[k * stride] over k < n, -inf for none. NaN is skipped (a comparison with
// NaN is false), as std::max(running, x) skips it; callers that must propagate NaN see it
// in their sums.
template <class T>
T row_max(const T* x, int64_t n, int64_t stride) {
  T acc[8];
  std::fill_n(acc, 8, -std::numeric_limits<T>::infinity());
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j) {
      acc[j] = x[(k + j) * stride] > acc[j] ? x[(k + j) * stride] : acc[j];
    }
  }
  for (; k < n; ++k) acc[0] = x[k * stride] > acc[0] ? x[k * stride] : acc[0];
  return *std::max_element(acc, acc + 8);
}

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_ROW_REDUCTIONS_H_
