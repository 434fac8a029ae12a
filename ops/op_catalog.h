// The op catalog: every op Kiln knows, with its trace-file name, its kind and its arity.
// Adding an op means one line in one of the lists below plus its rules in ops/ (for an
// elementwise op: its functor in ops/scalar_math.inc; docs/recipes.md).
#ifndef KILN_OPS_OP_CATALOG_H_
#define KILN_OPS_OP_CATALOG_H_

#include <optional>
#include <string_view>

namespace kiln::ops {

// What family an op belongs to; shape inference, evaluation and (later) fusion dispatch on it.
enum class OpClass {
  kLeaf,       // no inputs: input, constant, arange, rand, randn
  kUnary,      // elementwise, one input
  kBinary,     // elementwise, two inputs, numpy broadcasting
  kWhere,      // elementwise select, three inputs
  kCast,       // astype
  kReduce,     // sum mean max min over a set of axes
  kArgReduce,  // argmax argmin over one axis
  kView,       // reshape permute broadcast_to slice contiguous: index math, no arithmetic
  kMatmul,
  kConcat,
  kRowNorm,       // row ops: each result along one axis reads its whole row (softmax
                  // log_softmax layer_norm rms_norm; the scan cumsum; the selection topk)
  kCustom,        // a user's elementwise function (ops/custom_functions.h), F32 in and out
  kCustomKernel,  // a user's whole kernel (ops/custom_functions.h): its own rules for all
  kGather,        // take take_along_axis dynamic_slice: read their first operand at positions
                  // their second holds
  kUpdateSlice,   // update_slice, index_add: x with a range overwritten, or slices added into it
                  // (ops/update_slice.h, ops/index_add.h)
  kAttention,     // scaled_dot_product_attention: softmax(q kᵀ scale + mask) v (ops/attention.h)
  kCollective,    // all_reduce all_gather reduce_scatter broadcast send recv: bytes exchanged
                  // with the other processes of a group (comm/)
};

// X(Enum, name, class, arity): the enum, the name in trace files, errors and the public API
// (kiln::log_softmax), the class and the arity (-1: any number >= 1). The catalog is five lists
// so that a switch over one kind of op can name every other op without a `default:`.
// An elementwise op's enum name is also the name of its functor in ops/scalar_math.inc
// (kiln::math::Exp), which every device calls.
#define KILN_LEAF_OPS(X)          \
  X(Input, input, kLeaf, 0)       \
  X(Constant, constant, kLeaf, 0) \
  X(Arange, arange, kLeaf, 0)     \
  X(Rand, rand, kLeaf, 0)         \
  X(Randn, randn, kLeaf, 0)

#define KILN_UNARY_OPS(X)               \
  X(Neg, neg, kUnary, 1)                \
  X(Abs, abs, kUnary, 1)                \
  X(Exp, exp, kUnary, 1)                \
  X(Log, log, kUnary, 1)                \
  X(Sqrt, sqrt, kUnary, 1)              \
  X(Rsqrt, rsqrt, kUnary, 1)            \
  X(Sin, sin, kUnary, 1)                \
  X(Cos, cos, kUnary, 1)                \
  X(Tanh, tanh, kUnary, 1)              \
  X(Sigmoid, sigmoid, kUnary, 1)        \
  X(Relu, relu, kUnary, 1)              \
  X(Gelu, gelu, kUnary, 1)              \
  X(Silu, silu, kUnary, 1)              \
  X(Erf, erf, kUnary, 1)                \
  X(Floor, floor, kUnary, 1)            \
  X(Ceil, ceil, kUnary, 1)              \
  X(Reciprocal, reciprocal, kUnary, 1)  \
  X(Square, square, kUnary, 1)          \
  X(LogicalNot, logical_not, kUnary, 1) \
  X(Log1p, log1p, kUnary, 1)            \
  X(Expm1, expm1, kUnary, 1)

#define KILN_BINARY_OPS(X)               \
  X(Add, add, kBinary, 2)                \
  X(Sub, sub, kBinary, 2)                \
  X(Mul, mul, kBinary, 2)                \
  X(Div, div, kBinary, 2)                \
  X(Pow, pow, kBinary, 2)                \
  X(Maximum, maximum, kBinary, 2)        \
  X(Minimum, minimum, kBinary, 2)        \
  X(Eq, eq, kBinary, 2)                  \
  X(Ne, ne, kBinary, 2)                  \
  X(Lt, lt, kBinary, 2)                  \
  X(Le, le, kBinary, 2)                  \
  X(Gt, gt, kBinary, 2)                  \
  X(Ge, ge, kBinary, 2)                  \
  X(LogicalAnd, logical_and, kBinary, 2) \
  X(LogicalOr, logical_or, kBinary, 2)

// Views: index math over their operand, no arithmetic. Contiguous is the identity view
// that the planner always gives a buffer of its own (Tensor::contiguous).
#define KILN_VIEW_OPS(X)                 \
  X(Reshape, reshape, kView, 1)          \
  X(Permute, permute, kView, 1)          \
  X(BroadcastTo, broadcast_to, kView, 1) \
  X(Slice, slice, kView, 1)              \
  X(Contiguous, contiguous, kView, 1)

// Everything else: ops with structure beyond one element (where, casts, reductions,
// matmul, concat, row ops, custom code, gathers, update_slice, attention, collectives).
// recv's one operand only gives its result's dtype and shape; send's result is its operand.
#define KILN_STRUCTURED_OPS(X)                               \
  X(Where, where, kWhere, 3)                                 \
  X(Astype, astype, kCast, 1)                                \
  X(Sum, sum, kReduce, 1)                                    \
  X(Mean, mean, kReduce, 1)                                  \
  X(Max, max, kReduce, 1)                                    \
  X(Min, min, kReduce, 1)                                    \
  X(Argmax, argmax, kArgReduce, 1)                           \
  X(Argmin, argmin, kArgReduce, 1)                           \
  X(Matmul, matmul, kMatmul, 2)                              \
  X(Concat, concat, kConcat, -1)                             \
  X(Softmax, softmax, kRowNorm, 1)                           \
  X(LogSoftmax, log_softmax, kRowNorm, 1)                    \
  X(LayerNorm, layer_norm, kRowNorm, 3)                      \
  X(RmsNorm, rms_norm, kRowNorm, 2)                          \
  X(Cumsum, cumsum, kRowNorm, 1)                             \
  X(TopkIndices, topk_indices, kRowNorm, 1)                  \
  X(Custom, custom, kCustom, -1)                             \
  X(CustomKernel, custom_kernel, kCustomKernel, -1)          \
  X(Take, take, kGather, 2)                                  \
  X(TakeAlongAxis, take_along_axis, kGather, 2)              \
  X(DynamicSlice, dynamic_slice, kGather, 2)                 \
  X(UpdateSlice, update_slice, kUpdateSlice, -1)             \
  X(IndexAdd, index_add, kUpdateSlice, 3)                    \
  X(Attention, scaled_dot_product_attention, kAttention, -1) \
  X(AllReduce, all_reduce, kCollective, 1)                   \
  X(AllGather, all_gather, kCollective, 1)                   \
  X(ReduceScatter, reduce_scatter, kCollective, 1)           \
  X(Broadcast, broadcast, kCollective, 1)                    \
  X(Send, send, kCollective, 1)                              \
  X(Recv, recv, kCollective, 1)

#define KILN_OPS(X) \
  KILN_LEAF_OPS(X) KILN_UNARY_OPS(X) KILN_BINARY_OPS(X) KILN_STRUCTURED_OPS(X) KILN_VIEW_OPS(X)

// `case OpKind::e:` for every op of a list, so that a switch handling a few ops can name all
// the others: KILN_UNARY_OPS(KILN_OP_CASE) return ...; (no `default:`, so -Werror=switch
// catches an op added later).
#define KILN_OP_CASE(e, name, cls, arity) case ::kiln::ops::OpKind::e:

enum class OpKind {
#define KILN_OP_ENUM(e, name, cls, arity) e,
  KILN_OPS(KILN_OP_ENUM)
#undef KILN_OP_ENUM
};

struct OpInfo {
  OpKind kind;
  const char* name;  // the trace-file and error-message name: "log_softmax"
  OpClass op_class;
  int arity;
  const char* enum_name;  // "LogSoftmax"; for an elementwise op, its functor kiln::math::Exp
};

const OpInfo& op_info(OpKind op);
inline const char* op_name(OpKind op) { return op_info(op).name; }
inline OpClass op_class(OpKind op) { return op_info(op).op_class; }
std::optional<OpKind> op_from_name(std::string_view name);
// Every op, in catalog order (for tests and tools that enumerate the catalog).
const OpInfo* all_ops(int* count);

bool is_comparison(OpKind op);  // eq ne lt le gt ge

}  // namespace kiln::ops

#endif  // KILN_OPS_OP_CATALOG_H_
