// Elementwise ops of the public API, their operator forms and scalar forms.
#include "jit/graph/record.h"
#include "kiln/ops.h"
#include "ops/infer.h"

namespace kiln {
namespace {

using ops::OpKind;

Tensor unary(OpKind op, const Tensor& x) { return jit::record(op, {x}, {}); }
Tensor binary(OpKind op, const Tensor& a, const Tensor& b) { return jit::record(op, {a, b}, {}); }

}  // namespace

Tensor scalar_like(const Tensor& like, double value) {
  ops::Attrs attrs;
  attrs.dtype = ops::scalar_dtype(like.dtype(), value);
  attrs.value = value;
  return jit::record(OpKind::Constant, {}, std::move(attrs));
}

#define KILN_UNARY(fn, kind) \
  Tensor fn(const Tensor& x) { return unary(OpKind::kind, x); }
KILN_UNARY(neg, Neg)
KILN_UNARY(abs, Abs)
KILN_UNARY(exp, Exp)
KILN_UNARY(log, Log)
KILN_UNARY(sqrt, Sqrt)
KILN_UNARY(rsqrt, Rsqrt)
KILN_UNARY(sin, Sin)
KILN_UNARY(cos, Cos)
KILN_UNARY(tanh, Tanh)
KILN_UNARY(sigmoid, Sigmoid)
KILN_UNARY(relu, Relu)
KILN_UNARY(gelu, Gelu)
KILN_UNARY(silu, Silu)
KILN_UNARY(erf, Erf)
KILN_UNARY(floor, Floor)
KILN_UNARY(ceil, Ceil)
KILN_UNARY(reciprocal, Reciprocal)
KILN_UNARY(square, Square)
KILN_UNARY(logical_not, LogicalNot)
#undef KILN_UNARY

#define KILN_BINARY(fn, kind) \
  Tensor fn(const Tensor& a, const Tensor& b) { return binary(OpKind::kind, a, b); }
KILN_BINARY(add, Add)
KILN_BINARY(sub, Sub)
KILN_BINARY(mul, Mul)
KILN_BINARY(div, Div)
KILN_BINARY(pow, Pow)
KILN_BINARY(maximum, Maximum)
KILN_BINARY(minimum, Minimum)
KILN_BINARY(eq, Eq)
KILN_BINARY(ne, Ne)
KILN_BINARY(lt, Lt)
KILN_BINARY(le, Le)
KILN_BINARY(gt, Gt)
KILN_BINARY(ge, Ge)
KILN_BINARY(logical_and, LogicalAnd)
KILN_BINARY(logical_or, LogicalOr)
#undef KILN_BINARY

Tensor pow(const Tensor& a, double b) { return pow(a, scalar_like(a, b)); }
Tensor maximum(const Tensor& a, double b) { return maximum(a, scalar_like(a, b)); }
Tensor minimum(const Tensor& a, double b) { return minimum(a, scalar_like(a, b)); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return jit::record(OpKind::Where, {cond, a, b}, {});
}

Tensor operator-(const Tensor& x) { return neg(x); }

// Each operator in its three forms: tensor-tensor, tensor-scalar, scalar-tensor.
#define KILN_OPERATOR(sym, fn)                                                        \
  Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); }          \
  Tensor operator sym(const Tensor& a, double b) { return fn(a, scalar_like(a, b)); } \
  Tensor operator sym(double a, const Tensor& b) { return fn(scalar_like(b, a), b); }
KILN_OPERATOR(+, add)
KILN_OPERATOR(-, sub)
KILN_OPERATOR(*, mul)
KILN_OPERATOR(/, div)
KILN_OPERATOR(==, eq)
KILN_OPERATOR(!=, ne)
KILN_OPERATOR(<, lt)
KILN_OPERATOR(<=, le)
KILN_OPERATOR(>, gt)
KILN_OPERATOR(>=, ge)
#undef KILN_OPERATOR

}  // namespace kiln
