// Extending Kiln with your own code, two ways:
//  - an elementwise function (softplus), which fuses into generated kernels like a built-in;
//  - a whole kernel (a row-wise prefix sum, which fusion cannot express), which runs as its
//    own kernel with its own launch rule.
// Each has a CUDA definition (used on NVIDIA GPUs; the function's is checked with NVRTC when
// it is defined, the kernel's when a GPU first runs it) and a C++ definition (used on the
// CPU). A kernel may leave out the CUDA definition: it then runs only on the CPU.
//
//   build/samples/custom_kernel
#include <cmath>
#include <cstdio>

#include "kiln/kiln.h"

namespace {

using kiln::Tensor;

kiln::CustomElementwise define_softplus() {
  kiln::ElementwiseFunction f;
  f.name = "softplus";
  f.arity = 1;
  f.cuda = R"(__device__ float softplus(float x) {
  return x > 20.0f ? x : log1pf(expf(x));  // large x: exp would overflow, and softplus(x) ~ x
})";
  f.cpu = [](int64_t n, const float* const* in, float* out) {
    for (int64_t i = 0; i < n; ++i) {
      const float x = in[0][i];
      out[i] = x > 20.0f ? x : std::log1p(std::exp(x));
    }
  };
  return kiln::define_elementwise(f);
}

kiln::CustomKernel define_row_cumsum() {
  kiln::KernelFunction k;
  k.name = "row_cumsum";
  k.arity = 1;
  k.cuda = R"(extern "C" __global__ void row_cumsum(KilnKernelArgs a) {
  // One thread per row, a sequential scan along the row.
  const long long cols = a.out_shape[a.out_rank - 1];
  const long long rows = cols == 0 ? 0 : a.out_numel / cols;
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* x = (const float*)a.in[0] + row * cols;
  float* y = (float*)a.out + row * cols;
  float total = 0.0f;
  for (long long c = 0; c < cols; ++c) { total += x[c]; y[c] = total; }
})";
  k.infer = [](const std::vector<kiln::TensorType>& in) {
    if (in[0].dtype != kiln::DType::F32 || in[0].shape.empty()) {
      throw kiln::Error("expects an f32 tensor of rank >= 1");
    }
    return in[0];  // same dtype and shape
  };
  k.launch = [](const std::vector<kiln::TensorType>&, const kiln::TensorType& out) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < out.shape.size(); ++d) rows *= out.shape[d];
    kiln::LaunchDims dims;
    dims.grid[0] = (rows + 255) / 256;
    dims.block[0] = 256;
    return dims;
  };
  k.cpu = [](const std::vector<const void*>& in, const std::vector<kiln::TensorType>&, void* out,
             const kiln::TensorType& type) {
    const int64_t cols = type.shape.back();
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < type.shape.size(); ++d) rows *= type.shape[d];
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out);
    for (int64_t r = 0; r < rows; ++r) {
      float total = 0;
      for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = total += x[r * cols + c];
    }
  };
  return kiln::define_kernel(k);
}

}  // namespace

int main() {
  try {
    const kiln::CustomElementwise softplus = define_softplus();
    const kiln::CustomKernel row_cumsum = define_row_cumsum();

    const std::vector<float> xs = {-2, -1, 0, 1, 2, 30};
    Tensor x = Tensor::from_vector(xs, {2, 3});
    Tensor smooth = softplus({x * 2.0}) - 1.0;  // one fused kernel: mul, softplus, sub
    Tensor running = row_cumsum({smooth});      // its own kernel
    std::printf("%s\n", kiln::explain_plan({running}, kiln::ExplainDetail::kPlan).c_str());

    const std::vector<float> s = smooth.to_vector<float>();
    const std::vector<float> r = running.to_vector<float>();
    bool right = true;
    for (int row = 0; row < 2; ++row) {
      float total = 0;
      for (int col = 0; col < 3; ++col) {
        const float v = 2.0f * xs[row * 3 + col];
        const float want = (v > 20.0f ? v : std::log1p(std::exp(v))) - 1.0f;
        total += want;
        std::printf("x=%5.1f  softplus(2x)-1=%8.4f  running sum=%8.4f\n", v / 2, s[row * 3 + col],
                    r[row * 3 + col]);
        right = right && std::fabs(s[row * 3 + col] - want) < 1e-5f &&
                std::fabs(r[row * 3 + col] - total) < 1e-4f;
      }
    }
    std::printf("matches the definitions: %s\n", right ? "yes" : "NO");
    return right ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
