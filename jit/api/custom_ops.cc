// kiln::define_elementwise: checking and registering a user's elementwise function.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/backend/backend.h"
#include "jit/graph/record.h"
#include "kiln/custom.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"

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

// OK when CUDA's registered renderer compiles `source` (NVRTC), or cannot check it here (no
// CUDA toolkit: nothing can run it).
absl::Status check_cuda(const std::string& source, const std::string& name) {
  const jit::SourceRenderer* cuda = jit::source_renderer(DeviceType::CUDA);
  return cuda == nullptr ? absl::OkStatus() : cuda->check(source, name);
}

void check_cuda_source(const ElementwiseFunction& f) {
  absl::Status s = check_cuda(check_kernel_source(f), absl::StrCat("kiln_check_", f.name));
  if (!s.ok()) {
    throw Error(absl::StrCat("[define_elementwise] '", f.name,
                             "': the CUDA source does not compile as a __device__ float ", f.name,
                             "(", f.arity, " floats): ", s.message()));
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

namespace {

TensorType public_type(const ops::ValueType& t) { return TensorType{t.dtype, t.shape}; }
ops::ValueType internal_type(const TensorType& t) { return ops::ValueType{t.shape, t.dtype}; }

std::vector<TensorType> public_types(const std::vector<ops::ValueType>& types) {
  std::vector<TensorType> out;
  out.reserve(types.size());
  for (const ops::ValueType& t : types) out.push_back(public_type(t));
  return out;
}

}  // namespace

CustomKernel define_kernel(const KernelFunction& k) {
  const std::string name = k.name;
  ops::CustomKernel def;
  def.name = k.name;
  def.arity = k.arity;
  def.cuda_source = k.cuda;
  if (k.infer) {
    def.infer =
        [infer = k.infer](const std::vector<ops::ValueType>& in) -> absl::StatusOr<ops::ValueType> {
      try {
        return internal_type(infer(public_types(in)));
      } catch (const std::exception& e) {
        return absl::InvalidArgumentError(e.what());
      }
    };
  }
  if (k.launch) {
    def.launch = [launch = k.launch](const std::vector<ops::ValueType>& in,
                                     const ops::ValueType& out) {
      const LaunchDims asked = launch(public_types(in), public_type(out));
      ops::CustomKernelLaunch dims;
      for (int i = 0; i < 3; ++i) {
        dims.grid[i] = asked.grid[i];
        dims.block[i] = asked.block[i];
      }
      dims.shared_bytes = asked.shared_bytes;
      return dims;
    };
  }
  if (k.cpu) {
    def.cpu = [cpu = k.cpu](const std::vector<const void*>& in,
                            const std::vector<ops::ValueType>& types, void* out,
                            const ops::ValueType& out_type) {
      cpu(in, public_types(types), out, public_type(out_type));
    };
  }
  if (absl::Status s = ops::check_custom_kernel(def); !s.ok()) {
    throw Error(absl::StrCat("[define_kernel] '", name, "': ", s.message()));
  }
  // NVRTC compiles the CUDA source only when a CUDA device first runs the kernel.
  absl::StatusOr<int> id = ops::register_custom_kernel(std::move(def));
  if (!id.ok()) throw Error(absl::StrCat("[define_kernel] '", name, "': ", id.status().message()));
  return CustomKernel(*id, name);
}

Tensor CustomKernel::operator()(const std::vector<Tensor>& inputs) const {
  ops::Attrs attrs;
  attrs.function = id_;
  return jit::record(ops::OpKind::CustomKernel, inputs, std::move(attrs));
}

}  // namespace kiln
