// The reference evaluator's dispatch: one buffer per op, filled by its class's evaluation
// (ops/elementwise.cc, ops/reduction.cc, ops/view.cc, ...; the loops they share are in
// ops/reference_loops.h).
#include "ops/reference_evaluator.h"

#include <memory>
#include <vector>

#include "ops/attention.h"
#include "ops/collective.h"
#include "ops/concat.h"
#include "ops/custom_ops.h"
#include "ops/elementwise.h"
#include "ops/gather.h"
#include "ops/index_add.h"
#include "ops/leaf.h"
#include "ops/matmul.h"
#include "ops/reduction.h"
#include "ops/row_ops.h"
#include "ops/update_slice.h"
#include "ops/view.h"

namespace kiln::ops {

std::shared_ptr<base::Buffer> evaluate_reference(OpKind op, const Attrs& attrs,
                                                 const ValueType& declared,
                                                 const std::vector<HostValue>& given) {
  // Block-quantized values are held as the f32 values they decode to: a view of one is an
  // f32 view, and an op reading one reads f32.
  auto held = [](ValueType type) {
    if (is_block_quantized(type.dtype)) type.dtype = DType::F32;
    return type;
  };
  const ValueType out = held(declared);
  std::vector<HostValue> inputs = given;
  for (HostValue& in : inputs) in.type = held(in.type);
  auto result = std::make_shared<base::Buffer>(numel(out.shape) * dtype_size(out.dtype));
  switch (op_class(op)) {
    case OpClass::kLeaf:
      evaluate_leaf(op, attrs, out, *result);
      break;
    case OpClass::kUnary:
    case OpClass::kBinary:
    case OpClass::kWhere:
      evaluate_elementwise(op, out, inputs, *result);
      break;
    case OpClass::kCustom:
      evaluate_custom(attrs, out, inputs, *result);
      break;
    case OpClass::kCustomKernel:
      evaluate_custom_kernel(attrs, out, inputs, *result);
      break;
    case OpClass::kCast:
      evaluate_cast(out, inputs[0], *result);
      break;
    case OpClass::kReduce:
      evaluate_reduce(op, attrs, out, inputs[0], *result);
      break;
    case OpClass::kArgReduce:
      evaluate_arg_reduce(op, attrs, inputs[0], *result);
      break;
    case OpClass::kView:
      evaluate_view(op, attrs, out, inputs[0], *result);
      break;
    case OpClass::kMatmul:
      evaluate_matmul(out, inputs, *result);
      break;
    case OpClass::kConcat:
      evaluate_concat(attrs, out, inputs, *result);
      break;
    case OpClass::kRowNorm:
      evaluate_row_op(op, attrs, out, inputs, *result);
      break;
    case OpClass::kGather:
      evaluate_gather(op, attrs, out, inputs, *result);
      break;
    case OpClass::kUpdateSlice:
      if (op == OpKind::IndexAdd) {
        evaluate_index_add(attrs, out, inputs, *result);
      } else {
        evaluate_update_slice(attrs, out, inputs, *result);
      }
      break;
    case OpClass::kAttention:
      evaluate_attention(attrs, out, inputs, *result);
      break;
    case OpClass::kCollective:
      evaluate_collective(op, attrs, out, inputs, *result);
      break;
  }
  return result;
}

}  // namespace kiln::ops
