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

}  // namespace kiln

#endif  // KILN_CUSTOM_H_
