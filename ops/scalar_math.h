// The scalar definition of every elementwise op: what one element of the output is, given
// one element of each input. The reference evaluator calls these; generated kernels must
// agree with them.
//
// Floating ops are defined on double (values of narrower dtypes are computed exactly enough
// in double and rounded once on store). Integer ops are defined on int64 with two's
// complement wrap-around (an I32 result keeps the low 32 bits), so overflow is never UB.
#ifndef KILN_OPS_SCALAR_MATH_H_
#define KILN_OPS_SCALAR_MATH_H_

#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/op_catalog.h"

namespace kiln::ops {

// x * Phi(x), through erfc so that very negative x loses nothing to cancellation.
// One element of a floating unary op, in double (the reference) or float (fused kernels).
template <class T>
T unary_float(OpKind op, T x) {
  switch (op) {
    case OpKind::Neg:
      return -x;
    case OpKind::Abs:
      return std::fabs(x);
    case OpKind::Exp:
      return std::exp(x);
    case OpKind::Log:
      return std::log(x);
    case OpKind::Sqrt:
      return std::sqrt(x);
    case OpKind::Rsqrt:
      return T(1) / std::sqrt(x);
    case OpKind::Sin:
      return std::sin(x);
    case OpKind::Cos:
      return std::cos(x);
    case OpKind::Tanh:
      return std::tanh(x);
    case OpKind::Sigmoid:
      return T(1) / (T(1) + std::exp(-x));
    case OpKind::Relu:
      return x > 0 ? x : (std::isnan(x) ? x : T(0));
    case OpKind::Gelu:
      // x * Phi(x), through erfc so that very negative x loses nothing to cancellation.
      return T(0.5) * x * std::erfc(-x * T(0.70710678118654752440));
    case OpKind::Silu:
      return x / (T(1) + std::exp(-x));
    case OpKind::Erf:
      return std::erf(x);
    case OpKind::Floor:
      return std::floor(x);
    case OpKind::Ceil:
      return std::ceil(x);
    case OpKind::Reciprocal:
      return T(1) / x;
    case OpKind::Square:
      return x * x;
    default:
      return std::numeric_limits<T>::quiet_NaN();
  }
}

// Wrapping int64 arithmetic through uint64 (defined behaviour on overflow).
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Integer power by squaring; a negative exponent gives 0 unless the base is 1 or -1 (the
// exact result truncated toward zero).
inline int64_t int_pow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent % 2 == 0) ? 1 : -1;
    return 0;
  }
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exponent >>= 1;
  }
  return result;
}

inline int64_t unary_int(OpKind op, int64_t x) {
  switch (op) {
    case OpKind::Neg:
      return wrap_sub(0, x);
    case OpKind::Abs:
      return x < 0 ? wrap_sub(0, x) : x;
    case OpKind::Relu:
      return x > 0 ? x : 0;
    case OpKind::Square:
      return wrap_mul(x, x);
    case OpKind::Floor:
    case OpKind::Ceil:
      return x;
    case OpKind::LogicalNot:
      return x == 0;
    default:
      return 0;
  }
}

inline double binary_float(OpKind op, double a, double b) {
  switch (op) {
    case OpKind::Add:
      return a + b;
    case OpKind::Sub:
      return a - b;
    case OpKind::Mul:
      return a * b;
    case OpKind::Div:
      return a / b;
    case OpKind::Pow:
      return std::pow(a, b);
    case OpKind::Maximum:
      return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN()
                                              : (a > b ? a : b);
    case OpKind::Minimum:
      return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN()
                                              : (a < b ? a : b);
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

inline int64_t binary_int(OpKind op, int64_t a, int64_t b) {
  switch (op) {
    case OpKind::Add:
      return wrap_add(a, b);
    case OpKind::Sub:
      return wrap_sub(a, b);
    case OpKind::Mul:
      return wrap_mul(a, b);
    case OpKind::Pow:
      return int_pow(a, b);
    case OpKind::Maximum:
      return a > b ? a : b;
    case OpKind::Minimum:
      return a < b ? a : b;
    default:
      return 0;
  }
}

template <class T>
bool compare(OpKind op, T a, T b) {
  switch (op) {
    case OpKind::Eq:
      return a == b;
    case OpKind::Ne:
      return a != b;
    case OpKind::Lt:
      return a < b;
    case OpKind::Le:
      return a <= b;
    case OpKind::Gt:
      return a > b;
    case OpKind::Ge:
      return a >= b;
    default:
      return false;
  }
}

}  // namespace kiln::ops

#endif  // KILN_OPS_SCALAR_MATH_H_
