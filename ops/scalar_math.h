// The host's view of ops/scalar_math.inc: every elementwise op's functor in kiln::math, and
// the dispatch from an OpKind to its functor. The reference evaluator calls the functors on
// double, the CPU executor on its float, double and int64 registers; the CUDA renderer emits
// calls to the same functors by name (OpInfo::enum_name), in modules that carry the .inc as
// source.
#ifndef KILN_OPS_SCALAR_MATH_H_
#define KILN_OPS_SCALAR_MATH_H_

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kiln/dtype.h"
#include "ops/op_catalog.h"

namespace kiln::math {

#define KILN_SCALAR inline
#include "ops/scalar_math.inc"
#undef KILN_SCALAR

// The bits of precision rand draws for dtype `dt`, so that every uniform value is exact in it
// and never rounds up to 1: its significand (the implicit one included), 24 for f32 and f64.
inline int uniform_bits(DType dt) {
  switch (dt) {
    case DType::F8E5M2:
      return 3;
    case DType::F8E4M3:
      return 4;
    case DType::BF16:
      return 8;
    case DType::F16:
      return 11;
    default:
      return 24;
  }
}

// A tag for "no functor": the op handed to a dispatcher is not of its kind (an internal
// error: callers check the op's class first).
[[noreturn]] inline void not_of_kind(ops::OpKind op, const char* kind) {
  throw std::logic_error(std::string("internal error: ") + ops::op_name(op) + " is not a " + kind +
                         " op");
}

// Calls f(kiln::math::<Op>{}) for unary op `op` and returns what f returns.
template <class F>
decltype(auto) with_unary_functor(ops::OpKind op, F&& f) {
  switch (op) {
#define KILN_UNARY_CASE(e, name, cls, arity) \
  case ops::OpKind::e:                       \
    return f(e{});
    KILN_UNARY_OPS(KILN_UNARY_CASE)
#undef KILN_UNARY_CASE
    KILN_LEAF_OPS(KILN_OP_CASE)
    KILN_BINARY_OPS(KILN_OP_CASE)
    KILN_STRUCTURED_OPS(KILN_OP_CASE)
    KILN_VIEW_OPS(KILN_OP_CASE)
    break;
  }
  not_of_kind(op, "unary");
}

// Calls f(kiln::math::<Op>{}) for binary op `op` and returns what f returns.
template <class F>
decltype(auto) with_binary_functor(ops::OpKind op, F&& f) {
  switch (op) {
#define KILN_BINARY_CASE(e, name, cls, arity) \
  case ops::OpKind::e:                        \
    return f(e{});
    KILN_BINARY_OPS(KILN_BINARY_CASE)
#undef KILN_BINARY_CASE
    KILN_LEAF_OPS(KILN_OP_CASE)
    KILN_UNARY_OPS(KILN_OP_CASE)
    KILN_STRUCTURED_OPS(KILN_OP_CASE)
    KILN_VIEW_OPS(KILN_OP_CASE)
    break;
  }
  not_of_kind(op, "binary");
}

// Whether elementwise op `op` keeps integer dtypes (neg of an i32 is an i32) rather than
// computing integers in f32 (exp of an i32 is an f32).
inline bool keeps_integers(ops::OpKind op) {
  auto integers = [](auto functor) { return decltype(functor)::kIntegers; };
  return ops::op_class(op) == ops::OpClass::kUnary ? with_unary_functor(op, integers)
                                                   : with_binary_functor(op, integers);
}

// Whether elementwise op `op` gives bool (comparisons and logical ops).
inline bool gives_bool(ops::OpKind op) {
  auto bools = [](auto functor) { return decltype(functor)::kBoolResult; };
  return ops::op_class(op) == ops::OpClass::kUnary ? with_unary_functor(op, bools)
                                                   : with_binary_functor(op, bools);
}

// One element of unary op `op` on a register of type T (float, double or int64_t). For an
// integer register, an op without integer meaning is an internal error.
template <class T>
T apply_unary(ops::OpKind op, T x) {
  return with_unary_functor(op, [&](auto fn) -> T {
    using Fn = decltype(fn);
    if constexpr (std::is_floating_point_v<T> || Fn::kIntegers) {
      return static_cast<T>(fn(x));
    } else {
      not_of_kind(op, "integer unary");
    }
  });
}

// One element of binary op `op` on registers of type T; comparisons and logical ops give 0
// or 1 in T.
template <class T>
T apply_binary(ops::OpKind op, T a, T b) {
  return with_binary_functor(op, [&](auto fn) -> T {
    using Fn = decltype(fn);
    if constexpr (std::is_floating_point_v<T> || Fn::kIntegers) {
      return static_cast<T>(fn(a, b));
    } else {
      not_of_kind(op, "integer binary");
    }
  });
}

}  // namespace kiln::math

#endif  // KILN_OPS_SCALAR_MATH_H_
