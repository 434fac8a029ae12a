// Launching a plan's kernels on one GPU: each kernel's buffers, its packed Params and launch
// schedule, the matmuls cuBLASLt runs (decided once per plan), collectives, custom kernels
// and the index error word of plans that gather. Under a graph capture it also records what
// the graph's replays need (graph_replay.h).
//
// Every method runs with the device's stream mutex held and its context current.
#ifndef KILN_RUNTIME_CUDA_PLAN_LAUNCHER_H_
#define KILN_RUNTIME_CUDA_PLAN_LAUNCHER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/buffer.h"
#include "jit/backend/backend.h"
#include "runtime/cuda/cublaslt_gemm.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/kernel_args.h"

namespace kiln::runtime::cuda {

// A plan's buffers by node, as a run fills them.
using Buffers = absl::flat_hash_map<int, std::shared_ptr<base::Buffer>>;

// A captured launch that reads some of the plan's scalars: what a call with other scalars
// gives cuGraphExecKernelNodeSetParams to change it in place.
struct ScalarLaunch {
  CUgraphNode node = nullptr;    // in the captured graph
  KernelNodeParams launch;       // its function, grid, block and shared memory
  std::vector<std::byte> block;  // its Params, the scalars at `offset`
  SplitArgs split;               // its second argument
  size_t offset = 0;             // of Params::p
  std::vector<int> plan_params;  // per p[] slot, the plan's scalar
  std::string kernel;            // the program's name, for errors
};

// What launch_kernels records while a graph is captured: every buffer written (its replays
// write them again) and each launch that reads a scalar.
struct CaptureRecord {
  std::vector<std::shared_ptr<base::Buffer>> owned;
  std::vector<ScalarLaunch> scalar_launches;
};

// How a plan's matmul kernels run (PlanLauncher::matmuls_of): decided once, when the plan
// first runs.
struct PlanMatmuls {
  uint64_t generation = 0;  // of the cuBLASLt library it was decided with
  // What the decision read: each kernel's program (kept, so no other program takes its
  // address) and each matmul kernel's launch. A freed plan's entry, found at the address
  // of a new plan, differs in one of them.
  std::vector<std::shared_ptr<const jit::KernelProgram>> programs;
  std::vector<std::pair<size_t, jit::KernelLaunch>> launches;
  std::vector<bool> on_cublaslt;                   // per kernel: cuBLASLt runs it
  std::vector<std::optional<CublasLtGemm>> gemms;  // per kernel: its call, where it does
  // Per kernel: what its last cuBLASLt call looked up, so that a steady run of the plan
  // takes no lock there (CublasLtMatmuls::LastCall).
  std::vector<CublasLtMatmuls::LastCall> last_calls;

  bool describes(const jit::LaunchPlan& plan) const;
};

class PlanLauncher {
 public:
  explicit PlanLauncher(CudaDevice& device) : device_(device) {}

  // A run of `plan` once `inputs` (per plan input slot) are on this device. `matmuls`: the
  // plan's (matmuls_of), when the caller has looked them up.
  std::vector<std::shared_ptr<base::Buffer>> run_placed(
      const jit::LaunchPlan& plan, const jit::PlanArguments& args,
      const std::vector<std::shared_ptr<base::Buffer>>& inputs, PlanMatmuls* matmuls = nullptr);

  // Launches every kernel of `plan` (`functions`: their entry points, from prepare);
  // `buffers` maps the plan's input nodes to their buffers and receives every node it
  // computes. Each kernel's intermediates are released after their last reader (stream order
  // makes reuse safe). While `capture` is captured, it keeps every buffer written (its
  // replays write them again) and each launch that reads a scalar. An update_slice's output
  // starts as its x: x's own buffer where jit::output_start allows, else a copy.
  // A matmul planned on cuBLASLt (its Function null) runs as one cuBLASLt call (`matmuls`'
  // gemm), or else its kernel is compiled now and launched.
  void launch_kernels(const jit::LaunchPlan& plan, PlanMatmuls& matmuls,
                      std::vector<CudaDevice::Function>& functions,
                      const std::vector<double>& plan_params, const std::vector<bool>& donated,
                      Buffers& buffers, CaptureRecord* capture);

  // Which kernels of `plan` cuBLASLt runs, as the plan dump says (describe_plan): those are
  // not compiled. Decided once per plan (and cuBLASLt library): a later run of the plan costs
  // one lookup and a check that the entry is this plan's, not a freed plan's at the same
  // address.
  PlanMatmuls& matmuls_of(const jit::LaunchPlan& plan);

  void copy_on_device(const base::Buffer& to, const base::Buffer& from);

  // Out-of-range indices (ops/gather.h): every gather reports into one IndexErrorWord on the
  // device. It is zeroed before a plan with gathers runs, and read after it (which waits for
  // the plan): the run then raises the first report. The word is made on first use, outside
  // any graph capture.
  void reset_index_error();
  void check_index_error();
  static bool plan_gathers(const jit::LaunchPlan& plan);

 private:
  static constexpr size_t kMaxPlanMatmuls = 256;

  // Runs matmul kernel `pk` as `gemm` (its plan's, matmuls_of) through cuBLASLt over these
  // buffers; false when cuBLASLt has no algorithm for their alignment, takes no bias at
  // their offset, or its call failed (said once, cublaslt_matmul.h): the caller then launches
  // the generated kernel. `last`: the kernel's last lookup, reused when it still applies.
  bool launch_cublaslt(const jit::PlannedKernel& pk, const CublasLtGemm& gemm,
                       const std::vector<uint64_t>& ins, const std::vector<uint64_t>& outs,
                       CublasLtMatmuls::LastCall& last);

  void launch_custom(CUfunction f, const jit::KernelProgram* program,
                     const jit::KernelLaunch& launch, const std::vector<uint64_t>& ins,
                     uint64_t out);

  CudaDevice& device_;
  std::shared_ptr<base::Buffer> index_error_;  // the device's IndexErrorWord, once a plan gathers
  // Per plan, what matmuls_of decided; guarded by the stream mutex.
  absl::flat_hash_map<const jit::LaunchPlan*, std::unique_ptr<PlanMatmuls>> plan_matmuls_;
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_PLAN_LAUNCHER_H_
