// The reference evaluator: computes one op at a time on realized, contiguous inputs. Simple
// and obviously correct rather than fast; it is the oracle every device is tested against.
#ifndef KILN_OPS_REFERENCE_EVALUATOR_H_
#define KILN_OPS_REFERENCE_EVALUATOR_H_

#include <memory>
#include <vector>

#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/value_type.h"

namespace kiln::ops {

struct HostValue {
  ValueType type;
  std::shared_ptr<const base::Buffer> buffer;  // contiguous, row-major
};

// Computes `op` (whose output type inference gave as `out`) into a new buffer. A value of a
// block-quantized dtype (an operand, or a view's result) is held as the f32 values its
// blocks decode to: the caller passes a realized block tensor dequantized.
std::shared_ptr<base::Buffer> evaluate_reference(OpKind op, const Attrs& attrs,
                                                 const ValueType& out,
                                                 const std::vector<HostValue>& inputs);

}  // namespace kiln::ops

#endif  // KILN_OPS_REFERENCE_EVALUATOR_H_
