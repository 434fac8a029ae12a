#include <string>

#include "absl/strings/str_cat.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

// A user's whole kernel is its own source after the argument struct; Kiln adds nothing.
std::string render_custom_kernel(const jit::KernelProgram& program) {
  const ops::CustomKernel* k = ops::custom_kernel(program.anchor_attrs.function);
  return absl::StrCat("// custom kernel '", k->name, "' (user source)\n",
                      ops::kCustomKernelArgsSource, "\n", k->cuda_source, "\n");
}

}  // namespace kiln::runtime::cuda
