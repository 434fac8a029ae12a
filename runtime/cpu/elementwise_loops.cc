// The tile evaluator's elementwise loops (elementwise_loops.h): a switch per call to the
// op's functor or to a Highway loop of simd_math.h, then one loop over the values.
#include "runtime/cpu/elementwise_loops.h"

#include <cstddef>
#include <type_traits>

#include "ops/scalar_math.h"
#include "runtime/cpu/simd_math.h"

namespace kiln::runtime::cpu {
namespace {

using ops::OpKind;

// The f32 transcendental ops, those of KILN_SIMD_UNARY_OPS (runtime/cpu/simd_math.h), use
// its Highway loops instead of the functor; tests/ops/scalar_math_test.cc checks each against
// it. Returns false when `op` has no SIMD version.
#define KILN_SIMD_CASE(Enum, name)               \
  case OpKind::Enum:                             \
    simd_##name(a, out, static_cast<size_t>(n)); \
    return true;
bool simd_unary(OpKind op, const float* a, float* out, int64_t n) {
  switch (op) {
    KILN_SIMD_UNARY_OPS(KILN_SIMD_CASE)
    default:
      return false;
  }
}
#undef KILN_SIMD_CASE

}  // namespace

template <class T>
void unary_loop(OpKind op, const T* a, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (simd_unary(op, a, out, n)) return;
  }
  math::with_unary_functor(op, [&](auto fn) {
    if constexpr (std::is_floating_point_v<T> || decltype(fn)::kIntegers) {
      for (int64_t e = 0; e < n; ++e) out[e] = static_cast<T>(fn(a[e]));
    } else {
      math::not_of_kind(op, "integer unary");
    }
  });
}

// Operands of type T; results of type R (T, or int64 0/1 for comparisons and logical ops).
template <class T, class R>
void binary_loop(OpKind op, const T* a, const T* b, R* out, int64_t n) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float>) {
    // f32 pow is the one transcendental binary op; simd_pow stands in for its functor. The
    // four arithmetic ops run in the machine's widest vectors.
    const size_t count = static_cast<size_t>(n);
    switch (op) {
      case OpKind::Pow:
        return simd_pow(a, b, out, count);
      case OpKind::Add:
        return simd_add(a, b, out, count);
      case OpKind::Sub:
        return simd_sub(a, b, out, count);
      case OpKind::Mul:
        return simd_mul(a, b, out, count);
      case OpKind::Div:
        return simd_div(a, b, out, count);
      default:
        break;
    }
  }
  math::with_binary_functor(op, [&](auto fn) {
    if constexpr (std::is_floating_point_v<T> || decltype(fn)::kIntegers) {
      for (int64_t e = 0; e < n; ++e) out[e] = static_cast<R>(fn(a[e], b[e]));
    } else {
      math::not_of_kind(op, "integer binary");
    }
  });
}

template void unary_loop<float>(OpKind, const float*, float*, int64_t);
template void unary_loop<double>(OpKind, const double*, double*, int64_t);
template void unary_loop<int64_t>(OpKind, const int64_t*, int64_t*, int64_t);
template void binary_loop<float, float>(OpKind, const float*, const float*, float*, int64_t);
template void binary_loop<double, double>(OpKind, const double*, const double*, double*, int64_t);
template void binary_loop<int64_t, int64_t>(OpKind, const int64_t*, const int64_t*, int64_t*,
                                            int64_t);
template void binary_loop<float, int64_t>(OpKind, const float*, const float*, int64_t*, int64_t);
template void binary_loop<double, int64_t>(OpKind, const double*, const double*, int64_t*, int64_t);

void unary_f32(OpKind op, const float* in, float* out, int64_t n) {
  unary_loop<float>(op, in, out, n);
}

}  // namespace kiln::runtime::cpu
