// kiln::define_elementwise: checking and registering a user's elementwise function.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/record.h"
#include "kiln/custom.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace kiln {
namespace {

// A one-thread kernel calling the function, so that NVRTC checks the user's source, its
// name and its arity exactly as generated kernels will use it.
std::string check_kernel_source(const ElementwiseFunction& f) {
  std::vector<std::string> params, args;
  for (int k = 0; k < f.arity; ++k) {
    params.push_back(absl::StrCat("float a", k));
    args.push_back(absl::StrCat("a", k));
  }
  return absl::StrCat(f.cuda, "\n\nextern \"C\" __global__ void kiln_check_", f.name,
                      "(float* out, ", absl::StrJoin(params, ", "), ") {\n  *out = ", f.name, "(",
                      absl::StrJoin(args, ", "), ");\n}\n");
}

void check_cuda_source(const ElementwiseFunction& f) {
  if (!runtime::cuda::nvrtc_available().ok()) return;  // no CUDA toolkit: nothing can run it
  absl::StatusOr<std::string> cubin = runtime::cuda::compile_to_cubin(
      check_kernel_source(f), absl::StrCat("kiln_check_", f.name), 80);
  if (!cubin.ok()) {
    throw Error(absl::StrCat("[define_elementwise] '", f.name,
                             "': the CUDA source does not compile as a __device__ float ", f.name,
                             "(", f.arity, " floats): ", cubin.status().message()));
  }
}

}  // namespace

CustomElementwise define_elementwise(ElementwiseFunction f) {
  const std::string name = f.name;
  ops::CustomFunction def;
  def.name = f.name;
  def.arity = f.arity;
  def.cuda_source = f.cuda;
  def.cpu = std::move(f.cpu);
  if (absl::Status s = ops::check_custom_function(def); !s.ok()) {
    throw Error(absl::StrCat("[define_elementwise] '", name, "': ", s.message()));
  }
  check_cuda_source(f);
  absl::StatusOr<int> id = ops::register_custom_function(std::move(def));
  if (!id.ok())
    throw Error(absl::StrCat("[define_elementwise] '", name, "': ", id.status().message()));
  return CustomElementwise(*id, name);
}

Tensor CustomElementwise::operator()(const std::vector<Tensor>& inputs) const {
  ops::Attrs attrs;
  attrs.function = id_;
  return jit::record(ops::OpKind::Custom, inputs, std::move(attrs));
}

}  // namespace kiln
