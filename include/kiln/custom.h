// Your own elementwise functions, fused into generated kernels like built-in ops.
//
// A function has two definitions of the same math: CUDA C++ source defining a __device__
// function of `arity` floats returning float (pasted into every CUDA kernel that uses it),
// and a C++ function over batches of floats (run by the CPU device and the reference
// evaluator). Operands are broadcast as numpy does and converted to F32; the result is F32.
//
//   kiln::ElementwiseFunction def;
//   def.name = "softplus";
//   def.arity = 1;
//   def.cuda = "__device__ float softplus(float x) { return log1pf(expf(x)); }";
//   def.cpu = [](int64_t n, const float* const* in, float* out) {
//     for (int64_t i = 0; i < n; ++i) out[i] = std::log1p(std::exp(in[0][i]));
//   };
//   kiln::CustomElementwise softplus = kiln::define_elementwise(def);
//   kiln::Tensor y = softplus({x}) * 2;  // one fused kernel
//
// Where NVRTC is installed, define_elementwise compiles the CUDA source once and throws
// kiln::Error holding NVRTC's log if it does not compile. Definitions are process-wide and
// permanent; defining the same name again with the same source returns the same function.
#ifndef KILN_CUSTOM_H_
#define KILN_CUSTOM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

struct ElementwiseFunction {
  std::string name;  // a C identifier; the CUDA device function must have this name
  int arity = 1;     // 1 to 3 inputs
  std::string cuda;  // defines: __device__ float <name>(float a[, float b[, float c]])
  // out[i] = f(inputs[0][i], ...) for i < n (n is at most a few thousand per call; calls may
  // come from several threads at once).
  std::function<void(int64_t n, const float* const* inputs, float* out)> cpu;
};

class CustomElementwise {
 public:
  // Records the function over `inputs` (lazily, as any op).
  Tensor operator()(const std::vector<Tensor>& inputs) const;
  const std::string& name() const { return name_; }

 private:
  CustomElementwise(int id, std::string name) : id_(id), name_(std::move(name)) {}
  int id_;
  std::string name_;
  friend CustomElementwise define_elementwise(ElementwiseFunction f);
};

CustomElementwise define_elementwise(ElementwiseFunction f);

// A whole kernel of your own, for what fusion cannot express (a scan, a sort, a hand-tuned
// attention). It is an op like any other: it shows in traces, dumps and plans under its
// name. Nothing fuses into it: Kiln computes its inputs into dense row-major buffers first
// and stores its one output.
//
// The CUDA source defines `extern "C" __global__ void <name>(KilnKernelArgs a)`; Kiln pastes
// this struct before it:
//   struct KilnKernelArgs {
//     const void* in[8]; void* out;            // inputs and output, dense row-major
//     long long in_shape[8][8]; int in_rank[8];
//     long long out_shape[8]; int out_rank; long long out_numel;
//   };
struct TensorType {
  DType dtype;
  std::vector<int64_t> shape;
};

struct LaunchDims {
  int64_t grid[3] = {1, 1, 1};
  int block[3] = {256, 1, 1};
  int shared_bytes = 0;
};

struct KernelFunction {
  std::string name;  // a C identifier; the __global__ function's name
  int arity = 1;     // 1 to 8 inputs
  // The kernel's CUDA C++ source. Leave it empty for a CPU-only kernel: calling that one on
  // a CUDA tensor is then the error.
  std::string cuda;
  // The output's dtype and shape from the inputs'. Throw kiln::Error to reject a call; the
  // message becomes part of the op's error.
  std::function<TensorType(const std::vector<TensorType>& inputs)> infer;
  // The CUDA launch for these inputs and output (needed when `cuda` is given).
  std::function<LaunchDims(const std::vector<TensorType>& inputs, const TensorType& output)> launch;
  // The CPU fallback: computes the output from the inputs (all dense row-major, of the dtypes
  // and shapes given).
  std::function<void(const std::vector<const void*>& inputs,
                     const std::vector<TensorType>& input_types, void* output,
                     const TensorType& output_type)>
      cpu;
};

class CustomKernel {
 public:
  Tensor operator()(const std::vector<Tensor>& inputs) const;
  const std::string& name() const { return name_; }

 private:
  CustomKernel(int id, std::string name) : id_(id), name_(std::move(name)) {}
  int id_;
  std::string name_;
  friend CustomKernel define_kernel(const KernelFunction& k);
};

// Checks the definition and registers it. The CUDA source is compiled (by NVRTC) only when
// a CUDA device first runs the kernel: a source that does not compile, or does not define
// the kernel with the signature above, is then a kiln::Error at that sync.
CustomKernel define_kernel(const KernelFunction& k);

}  // namespace kiln

#endif  // KILN_CUSTOM_H_
