#include <string>

#include "absl/strings/str_cat.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {
namespace {

// Fails the module's compile, naming the kernel, unless the user's source defines the entry
// point with the one signature Kiln launches.
std::string signature_check(const std::string& name) {
  return absl::StrCat(
      "template <class A, class B> struct kiln_same { enum { value = 0 }; };\n",
      "template <class A> struct kiln_same<A, A> { enum { value = 1 }; };\n",
      "static_assert(kiln_same<decltype(&", name, "), void (*)(KilnKernelArgs)>::value, \"", name,
      " must be declared extern \\\"C\\\" __global__ void ", name, "(KilnKernelArgs)\");\n");
}

}  // namespace

// A user's whole kernel is its own source after the argument struct; Kiln adds only the
// signature check. A CPU-only kernel (no CUDA source) renders as a comment saying so: dumps
// and explain_plan show it, and recording it on a CUDA device is an error.
std::string render_custom_kernel(const jit::KernelProgram& program) {
  const ops::CustomKernel* k = ops::custom_kernel(program.anchor_attrs.function);
  if (k->cuda_source.empty()) {
    return absl::StrCat("// custom kernel '", k->name,
                        "' has no CUDA source: it runs only on the CPU\n");
  }
  return absl::StrCat("// custom kernel '", k->name, "' (user source)\n",
                      ops::kCustomKernelArgsSource, "\n", k->cuda_source, "\n\n",
                      signature_check(k->name));
}

}  // namespace kiln::runtime::cuda
