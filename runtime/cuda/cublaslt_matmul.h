// cuBLASLt on one GPU: the choice, per matmul kernel, between cuBLASLt and the generated
// kernel, and the cuBLASLt call itself.
//
// cuBLASLt runs a matmul kernel when cublaslt_gemm (cublaslt_gemm.h) takes it, the library
// loads, cublasLtCreate succeeds on the device, a bias is 16-byte aligned, and cuBLASLt's
// heuristic returns an algorithm (with a successful state) for the problem: its sizes,
// layouts and pointer alignments, within the workspace, with split-K partial sums added in
// f32. Otherwise, or with KILN_CUBLASLT=0, the generated kernel runs; every choice says why,
// for the plan dump.
#ifndef KILN_RUNTIME_CUDA_CUBLASLT_MATMUL_H_
#define KILN_RUNTIME_CUDA_CUBLASLT_MATMUL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cublaslt_gemm.h"
#include "runtime/cuda/driver.h"

namespace kiln::runtime::cuda {

// A kernel's buffers on the device: per input slot and per output slot, its address.
struct KernelPointers {
  std::vector<uint64_t> inputs, outputs;
};

// How one matmul kernel runs on a device.
struct MatmulChoice {
  std::optional<CublasLtGemm> gemm;  // set when cuBLASLt runs it
  std::string detail;                // the call's summary, or why the generated kernel runs

  bool cublaslt() const { return gemm.has_value(); }
  // "cublaslt (RELU_BIAS, f16 -> f16, M 128 N 64 K 256, 1 batch)" or "generated kernel
  // (epilogue not supported: sin)": the plan dump's words.
  std::string describe() const;
};

class CublasLtMatmuls {
 public:
  // Device memory for cuBLASLt's workspace, from the device's allocator.
  using Allocate = std::function<std::shared_ptr<base::Buffer>(int64_t bytes)>;
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;  // NVIDIA's advice for Hopper

  // KILN_CUBLASLT is read here, once. Nothing is loaded until a matmul could use cuBLASLt.
  CublasLtMatmuls(std::string device_name, Allocate allocate);
  ~CublasLtMatmuls();
  CublasLtMatmuls(const CublasLtMatmuls&) = delete;
  CublasLtMatmuls& operator=(const CublasLtMatmuls&) = delete;

  // How matmul kernel `program` runs under `launch`: with `pointers`, for those buffers
  // (their alignment narrows cuBLASLt's algorithms); without, for buffers as the allocator
  // gives them (256-byte aligned), which is what the plan dump says. The device's context
  // must be current (cublasLtCreate runs on first need).
  MatmulChoice choose(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const KernelPointers* pointers = nullptr);

  // Runs `gemm` (from choose) over `pointers` on `stream`: their own alignments (the bias's
  // included) are checked, and the heuristic asked again where they differ from the planned
  // ones; an error when cuBLASLt cannot take them (the caller launches the generated kernel).
  // A failure of the call itself also makes every later choice of that problem the generated
  // kernel, naming the failure.
  absl::Status run(const CublasLtGemm& gemm, const KernelPointers& pointers, CUstream stream);

 private:
  struct Prepared;  // a problem's descriptors and algorithm, or why it has none

  absl::Status ready();
  void release();
  Prepared& prepared(const CublasLtGemm& gemm, const KernelPointers* pointers);

  const std::string device_name_;
  const Allocate allocate_;
  const bool disabled_;  // KILN_CUBLASLT=0
  // The backend calls in under its stream mutex, but the plan dump (describe_plan) and
  // CublasLtMatmuls used on its own (tests, and any caller without that lock) need these
  // maps, the handle and api_ guarded too; an uncontended lock costs little next to a GEMM.
  std::mutex mutex_;
  std::optional<uint64_t> generation_;  // of the cublaslt_api() that api_ was copied from
  CublasLtApi api_;
  absl::Status status_;  // why cuBLASLt cannot run here, once ready() has run
  CublasLtHandle handle_ = nullptr;
  std::shared_ptr<base::Buffer> workspace_;
  // Per problem and operand alignments (problem_key); bounded (kMaxProblems).
  absl::flat_hash_map<std::vector<int64_t>, std::unique_ptr<Prepared>> problems_;
  // Per problem, whatever the alignments: why cuBLASLt failed on it once.
  absl::flat_hash_map<std::vector<int64_t>, absl::Status> failed_;
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUBLASLT_MATMUL_H_
