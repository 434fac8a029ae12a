// Kiln on a GPU: the workloads of the GPU performance targets (docs/contracts.md), each timed
// as the median of repeated runs after warm-up, with kiln::synchronize() around the timed
// region. Prints one line per workload: name, median ms, and GB/s (bytes that must move) or
// TFLOP/s.
// bench/gpu_torch_bench.py times the same workloads with PyTorch eager, torch.compile, a
// device-to-device copy and cuBLAS; scripts/gpu-check.sh runs both.
//   build-gpu/bench/gpu_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace {

using kiln::DType;
using kiln::Tensor;

double median_ms(const std::function<void()>& run, int reps) {
  run();  // warm-up: planning, NVRTC or the disk cache, module load
  kiln::synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    kiln::synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const std::string& name, double ms, double bytes, double flops = 0) {
  if (flops > 0) {
    std::printf("kiln %-34s %9.3f ms %9.1f TFLOP/s\n", name.c_str(), ms, flops / ms * 1e-9);
  } else {
    std::printf("kiln %-34s %9.3f ms %9.1f GB/s\n", name.c_str(), ms, bytes / ms * 1e-6);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 5 : 20;
  try {
    std::printf("device: %s\n",
                kiln::default_device().type == kiln::DeviceType::CUDA ? "cuda" : "cpu");
    {  // 8-op elementwise chain over 2^28 floats: read once, write once
      const int64_t n = int64_t{1} << (quick ? 24 : 28);
      Tensor x = Tensor::rand({n}, 1).eval();
      auto chain = [&] {
        (kiln::exp(-kiln::abs(x * 2.0 - 1.0)) * 0.5 + kiln::relu(x) - 0.25).eval();
      };
      report("chain8 f32 2^28", median_ms(chain, reps), 2.0 * 4 * n);
    }
    {  // sums over rows and over columns of 16384 x 16384
      const int64_t n = quick ? 4096 : 16384;
      Tensor x = Tensor::rand({n, n}, 2).eval();
      report("sum rows f32 16384^2", median_ms([&] { kiln::sum(x, {1}).eval(); }, reps),
             4.0 * n * n);
      report("sum cols f32 16384^2", median_ms([&] { kiln::sum(x, {0}).eval(); }, reps),
             4.0 * n * n);
    }
    for (DType dt : {DType::F32, DType::BF16}) {  // persistent rows: 32768 x 4096
      const int64_t rows = quick ? 4096 : 32768, cols = 4096;
      const double bytes = 2.0 * rows * cols * kiln::dtype_size(dt);
      Tensor x = Tensor::randn({rows, cols}, 3, dt).eval();
      Tensor w = Tensor::ones({cols}, dt).eval(), b = Tensor::zeros({cols}, dt).eval();
      const std::string t = dt == DType::F32 ? " f32" : " bf16";
      report("softmax" + t + " 32768x4096", median_ms([&] { kiln::softmax(x).eval(); }, reps),
             bytes);
      report("layer_norm" + t + " 32768x4096",
             median_ms([&] { kiln::layer_norm(x, w, b).eval(); }, reps), bytes);
    }
    {  // relu(x @ w + b) at 4096^3 in bf16
      const int64_t n = quick ? 1024 : 4096;
      Tensor x = Tensor::randn({n, n}, 4, DType::BF16).eval();
      Tensor w = Tensor::randn({n, n}, 5, DType::BF16).eval();
      Tensor b = Tensor::randn({n}, 6, DType::BF16).eval();
      report("relu(x@w+b) bf16 4096^3",
             median_ms([&] { kiln::relu(kiln::matmul(x, w) + b).eval(); }, reps), 0,
             2.0 * n * n * n);
    }
    // A llama-style up projection with a block-quantized [5632, 2048] weight: a decode step
    // (one row: the weight read once, GB/s of its blocks) and a prompt (512 rows, TFLOP/s).
    // bench/gpu_torch_bench.py times the same products with the bf16 weight.
    for (DType format : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
      const int64_t n = 5632, k = 2048, prompt = quick ? 128 : 512;
      Tensor w = Tensor::randn({n, k}, 13).astype(format);
      Tensor one = Tensor::randn({1, k}, 14).eval(), rows = Tensor::randn({prompt, k}, 15).eval();
      const std::string f = kiln::dtype_name(format);
      report("gemv " + f + " 5632x2048", median_ms([&] { kiln::linear(one, w).eval(); }, reps),
             static_cast<double>(kiln::storage_bytes(format, n * k)));
      report("gemm " + f + " 512x5632x2048", median_ms([&] { kiln::linear(rows, w).eval(); }, reps),
             0, 2.0 * prompt * n * k);
    }
    {  // host time per launched kernel on a plan hit: a 3-kernel program on tiny tensors
      Tensor x = Tensor::rand({64, 64}, 7).eval();
      auto small = [&] { (kiln::softmax(x) + kiln::sum(x, {1}, true)).eval(); };
      small();
      const kiln::Stats before = kiln::stats();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 1000; ++i) small();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      kiln::synchronize();
      const double launches =
          static_cast<double>(kiln::stats().kernels_launched - before.kernels_launched);
      std::printf("kiln %-34s %9.3f us per launched kernel (%g kernels)\n", "host time, plan hit",
                  us / launches, launches);
    }
    {  // a compiled MLP (several kernels: one CUDA graph per call) against the same code eagerly
      Tensor x = Tensor::randn({8, 256}, 8).eval();
      Tensor w1 = Tensor::randn({256, 512}, 9).eval(), b1 = Tensor::randn({512}, 10).eval();
      Tensor w2 = Tensor::randn({512, 64}, 11).eval(), b2 = Tensor::randn({64}, 12).eval();
      auto mlp = [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{
            kiln::softmax(kiln::matmul(kiln::relu(kiln::matmul(in[0], w1) + b1), w2) + b2)};
      };
      kiln::Compiled compiled = kiln::compile(mlp);
      const int calls = 200;
      auto per_call_us = [&](const std::function<void()>& call) {
        return median_ms(
                   [&] {
                     for (int i = 0; i < calls; ++i) call();
                   },
                   5) *
               1000.0 / calls;
      };
      const double eager = per_call_us([&] { mlp({x})[0].eval(); });
      const double replayed = per_call_us([&] { compiled({x}); });
      std::printf("kiln %-34s %9.3f us per call eager, %.3f us compiled (%.2fx)\n",
                  "mlp 8x256x512x64 f32", eager, replayed, eager / replayed);
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
