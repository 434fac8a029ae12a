// The custom op classes (ops/custom_functions.h has their registry): a user's elementwise
// function (OpClass::kCustom, F32 in and out, operands broadcast) and a user's whole kernel
// (kCustomKernel, with its own shape rule). Their inference and reference evaluation, which
// call the registered definitions.
#ifndef KILN_OPS_CUSTOM_OPS_H_
#define KILN_OPS_CUSTOM_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The output type of a custom function: its registered arity, numpy broadcasting, F32.
absl::StatusOr<ValueType> infer_custom(const std::vector<ValueType>& in, const Attrs& attrs);
// The output type of a custom kernel: its arity, at most 8 dims per operand and result
// (KilnKernelArgs, ops/custom_kernel_args.h), then its own shape rule.
absl::StatusOr<ValueType> infer_custom_kernel(const std::vector<ValueType>& in, const Attrs& attrs);

// Each operand broadcast and converted to F32, then one call of the C++ definition over all
// elements.
void evaluate_custom(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                     base::Buffer& result);
// The kernel's C++ fallback on the dense inputs.
void evaluate_custom_kernel(const Attrs& attrs, const ValueType& out,
                            const std::vector<HostValue>& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_CUSTOM_OPS_H_
