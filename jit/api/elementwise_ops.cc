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

// One public function per unary and binary op of the catalog (kiln::exp, kiln::add, ...),
// declared in include/kiln/ops.h.
#define KILN_UNARY_API(e, name, cls, arity) \
  Tensor name(const Tensor& x) { return unary(OpKind::e, x); }
KILN_UNARY_OPS(KILN_UNARY_API)
#undef KILN_UNARY_API

#define KILN_BINARY_API(e, name, cls, arity) \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(OpKind::e, a, b); }
KILN_BINARY_OPS(KILN_BINARY_API)
#undef KILN_BINARY_API

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

// Compound assignment rebinds the handle to the new value (ops.h).
#define KILN_COMPOUND(sym, fn)                                                 \
  Tensor& operator sym##=(Tensor& a, const Tensor& b) { return a = fn(a, b); } \
  Tensor& operator sym##=(Tensor& a, double b) { return a = fn(a, scalar_like(a, b)); }
KILN_COMPOUND(+, add)
KILN_COMPOUND(-, sub)
KILN_COMPOUND(*, mul)
KILN_COMPOUND(/, div)
#undef KILN_COMPOUND

}  // namespace kiln
