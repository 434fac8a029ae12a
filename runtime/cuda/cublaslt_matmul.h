// cuBLASLt on one GPU: the choice, per matmul kernel, between cuBLASLt and the generated
// kernel, and the cuBLASLt call itself.
//
// cuBLASLt runs a matmul kernel when cublaslt_gemm (cublaslt_gemm.h) takes it, the library
// loads, cublasLtCreate succeeds on the device, a bias is 16-byte aligned, and cuBLASLt's
// heuristic returns an algorithm (with a successful state) for the problem: its sizes,
// layouts and pointer alignments, within the workspace, with split-K partial sums added in
// f32. Otherwise, or with KILN_CUBLASLT=0, the generated kernel runs; every choice says why,
// for the plan dump.
//
// Choosing needs the library and a handle (the heuristic takes one) but no device memory:
// the 32 MiB workspace is allocated only when a matmul is to run (prepare_to_run, run).
#ifndef KILN_RUNTIME_CUDA_CUBLASLT_MATMUL_H_
#define KILN_RUNTIME_CUDA_CUBLASLT_MATMUL_H_

#include <array>
#include <atomic>
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
  struct Prepared;  // a problem's descriptors and algorithm, or why it has none

 public:
  // What run() looked up for one kernel's last call, kept per kernel by the caller: a later
  // call of the same gemm over buffers with the same alignments reuses it, without the lock
  // or the lookup. It lapses when the library changes or the problems it points into are
  // dropped.
  class LastCall {
   private:
    friend class CublasLtMatmuls;
    const CublasLtMatmuls* owner_ = nullptr;
    const CublasLtGemm* gemm_ = nullptr;
    uint64_t generation_ = 0;
    uint64_t epoch_ = 0;
    std::array<uint32_t, 4> alignments_{};  // a, b, bias (0 without one), d
    Prepared* prepared_ = nullptr;
  };

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
  // must be current (cublasLtCreate runs on first need). Allocates nothing.
  MatmulChoice choose(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const KernelPointers* pointers = nullptr);

  // Makes what running needs besides the handle: the workspace, on first need. An error
  // when it cannot be had; every later choice is then the generated kernel, saying why.
  // Called before a plan's first run, outside any graph capture.
  absl::Status prepare_to_run();

  // Runs `gemm` (from choose) over `pointers` on `stream`: their own alignments (the bias's
  // included) are checked, and the heuristic asked again where they differ from the planned
  // ones; an error when cuBLASLt cannot take them (the caller launches the generated kernel).
  // A failure of the call itself also makes every later choice of that problem the generated
  // kernel, naming the failure. With `last` (one per kernel, for the same `gemm` object each
  // call), a call whose buffers have the last call's alignments takes no lock: only for a
  // caller that never calls into this object from two threads at once (the backend holds
  // its stream mutex for every call).
  absl::Status run(const CublasLtGemm& gemm, const KernelPointers& pointers, CUstream stream,
                   LastCall* last = nullptr);

 private:
  absl::Status ready();
  absl::Status ready_to_run();
  void release();
  Prepared& prepared(const CublasLtGemm& gemm, const KernelPointers* pointers);
  // Sets the bias pointer of `p`'s descriptor and calls cublasLtMatmul.
  absl::Status call(const CublasLtGemm& gemm, Prepared& p, const KernelPointers& pointers,
                    CUstream stream);
  // Makes every later choice and run of `gemm`'s problem the generated kernel, after
  // `failure`, and says so once on stderr.
  void remember_failure(const CublasLtGemm& gemm, const absl::Status& failure);

  const std::string device_name_;
  const Allocate allocate_;
  const bool disabled_;  // KILN_CUBLASLT=0
  // The backend calls in under its stream mutex, but CublasLtMatmuls used on its own (tests,
  // and any caller without that lock) needs these maps, the handle and api_ guarded too. The
  // backend's steady runs skip it (run() with a LastCall): they hold the stream mutex anyway.
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
  // Counts the times problems_ was emptied (and release()): a LastCall made before points
  // to a Prepared that may be gone. Written under mutex_; atomic so run()'s unlocked check
  // reads a whole value.
  std::atomic<uint64_t> epoch_{1};
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUBLASLT_MATMUL_H_
