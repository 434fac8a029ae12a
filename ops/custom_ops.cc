// The custom op classes: inference and reference evaluation.
#include "ops/custom_ops.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ops/custom_functions.h"
#include "ops/element_access.h"
#include "ops/infer.h"
#include "ops/reference_loops.h"

namespace kiln::ops {

// A custom function: its registered arity, numpy broadcasting, computed in F32.
absl::StatusOr<ValueType> infer_custom(const std::vector<ValueType>& in, const Attrs& attrs) {
  const CustomFunction* f = custom_function(attrs.function);
  if (f == nullptr) {
    return op_error(
        OpKind::Custom, in,
        absl::StrCat("names function id ", attrs.function, ", which is not registered"));
  }
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("[custom ", f->name, "] ", what, describe_inputs(OpKind::Custom, in)));
  };
  if (static_cast<int>(in.size()) != f->arity) {
    return fail(absl::StrCat("takes ", f->arity, " inputs, got ", in.size()));
  }
  Shape shape = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k) {
    absl::StatusOr<Shape> joined = broadcast_shapes(shape, in[k].shape);
    if (!joined.ok()) return fail(std::string(joined.status().message()));
    shape = *joined;
  }
  return ValueType{shape, DType::F32};
}

// A custom kernel: its arity, then its own shape rule.
absl::StatusOr<ValueType> infer_custom_kernel(const std::vector<ValueType>& in,
                                              const Attrs& attrs) {
  const CustomKernel* k = custom_kernel(attrs.function);
  if (k == nullptr) {
    return op_error(OpKind::CustomKernel, in,
                    absl::StrCat("names kernel id ", attrs.function, ", which is not registered"));
  }
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("[custom_kernel ", k->name, "] ", what,
                                                   describe_inputs(OpKind::CustomKernel, in)));
  };
  if (static_cast<int>(in.size()) != k->arity) {
    return fail(absl::StrCat("takes ", k->arity, " inputs, got ", in.size()));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].shape.size() > 8) {  // KilnKernelArgs holds 8 dims per input
      return fail(absl::StrCat(operand_name(OpKind::CustomKernel, i), " has rank ",
                               in[i].shape.size(), "; a custom kernel takes at most 8 dimensions"));
    }
  }
  absl::StatusOr<ValueType> out = k->infer(in);
  if (!out.ok()) return fail(std::string(out.status().message()));
  for (int64_t d : out->shape) {
    if (d < 0) return fail(absl::StrCat("its shape rule gave a negative size ", d));
  }
  if (out->shape.size() > 8) return fail("its shape rule gave more than 8 dimensions");
  return out;
}

// A custom function: each operand broadcast and converted to F32, then one call of its C++
// definition over all elements.
void evaluate_custom(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                     base::Buffer& result) {
  const CustomFunction* f = custom_function(attrs.function);
  const int64_t n = numel(out.shape);
  std::vector<std::vector<float>> operands(in.size(), std::vector<float>(n));
  std::vector<Strides> strides;
  strides.reserve(in.size());
  for (const HostValue& v : in) strides.push_back(broadcast_strides(v.type.shape, out.shape));
  for_each_index(out.shape, strides, [&](int64_t i, const std::vector<int64_t>& off) {
    for (size_t k = 0; k < in.size(); ++k) {
      operands[k][i] = static_cast<float>(load_double(*in[k].buffer, in[k].type.dtype, off[k]));
    }
  });
  std::vector<const float*> pointers;
  pointers.reserve(operands.size());
  for (const auto& o : operands) pointers.push_back(o.data());
  f->cpu(n, pointers.data(), reinterpret_cast<float*>(result.data()));
}

void evaluate_custom_kernel(const Attrs& attrs, const ValueType& out,
                            const std::vector<HostValue>& in, base::Buffer& result) {
  std::vector<const void*> data;
  std::vector<ValueType> types;
  for (const HostValue& v : in) {
    data.push_back(v.buffer->data());
    types.push_back(v.type);
  }
  custom_kernel(attrs.function)->cpu(data, types, result.data(), out);
}

}  // namespace kiln::ops
