// Custom kernels (kiln/custom.h): a user's whole kernel, run through its C++ fallback.
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "runtime/cpu/kernel_families.h"

namespace kiln::runtime::cpu {

void run_custom_kernel(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                       const std::vector<const base::Buffer*>& inputs,
                       const std::vector<base::Buffer*>& outputs) {
  std::vector<const void*> data;
  std::vector<ops::ValueType> types;
  for (size_t k = 0; k < inputs.size(); ++k) {
    data.push_back(inputs[k]->data());
    types.push_back(ops::ValueType{launch.spaces[k + 1], program.input_dtypes[k]});
  }
  const ops::CustomKernel* k = ops::custom_kernel(program.anchor_attrs.function);
  try {
    k->cpu(data, types, outputs[0]->data(), ops::ValueType{launch.spaces[0], program.anchor_dtype});
  } catch (const std::exception& e) {
    throw Error(absl::StrCat("[custom_kernel ", k->name, "] its CPU fallback failed: ", e.what()));
  }
}

}  // namespace kiln::runtime::cpu
