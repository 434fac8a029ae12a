// CUDA graphs for compiled functions: a plan of several kernels captured once as a graph and
// then launched with one call, its scalars updated in place (docs/cuda.md, "CUDA graphs for
// compiled functions").
//
// Every method but captures() runs with the device's stream mutex held.
#ifndef KILN_RUNTIME_CUDA_GRAPH_REPLAY_H_
#define KILN_RUNTIME_CUDA_GRAPH_REPLAY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/buffer.h"
#include "jit/backend/backend.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/plan_launcher.h"

namespace kiln::runtime::cuda {

class GraphReplay {
 public:
  // `launcher` launches the kernels a graph captures, and runs a plan that replays without
  // one.
  GraphReplay(CudaDevice& device, PlanLauncher& launcher) : device_(device), launcher_(launcher) {}

  // Whether replay() may capture `plan`: two or more kernels, graphs not turned off
  // (KILN_CUDA_GRAPHS=0), and no collective, whose host-side checks (and a staged one's
  // copies) cannot be captured. Other plans run as a plain run does.
  static bool captures(const jit::LaunchPlan& plan);

  // A compiled function's plan of several kernels runs as one CUDA graph: captured on the
  // first replay, then launched with one call. The graph reads fixed input buffers: a slot
  // stays bound to the caller's buffer while every call passes that same buffer (weights),
  // and otherwise gets a buffer of its own that each call's argument is copied into
  // (activations; the one change re-captures the graph once). It writes buffers it owns,
  // and each call's outputs are fresh copies of them, so earlier results never change.
  // Changed scalars are written into the graph's launches in place, never re-captured. The
  // first call runs kernel by kernel, uncaptured: a failing kernel is then named (by
  // KILN_CUDA_SYNC=1 too), modules are loaded and the allocator warmed before any capture.
  // `inputs`: the plan's inputs, per slot, on this device.
  std::vector<std::shared_ptr<base::Buffer>> replay(
      const std::shared_ptr<const jit::LaunchPlan>& plan, const jit::PlanArguments& args,
      const std::vector<std::shared_ptr<base::Buffer>>& inputs);

 private:
  // A plan captured as a graph (see replay).
  struct Graph {
    std::weak_ptr<const jit::LaunchPlan> plan;
    // The captured graph is kept with its executable one: its nodes name the launches that
    // update_scalars changes in `exec`.
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    std::vector<std::shared_ptr<base::Buffer>> slots;  // per plan input slot, what the graph reads
    std::vector<bool> copied;    // per slot: Kiln's buffer, arguments copied in
    std::vector<double> params;  // the scalars its launches have now
    // Every buffer its kernels write, and its launches that read any scalar.
    CaptureRecord captured;
    std::vector<std::shared_ptr<base::Buffer>> outputs;  // per plan output
    int64_t launches = 0;                                // kernel launches it replays
    bool ran_uncaptured = false;                         // the plan's first call has run
    bool broken = false;                                 // capture failed: replay without a graph
  };

  // The graph record of `plan`, fresh if the plan is new (or an old plan's address reused).
  Graph& graph_for(const std::shared_ptr<const jit::LaunchPlan>& plan);
  void destroy(Graph& g);
  // Records the plan's launches over the graph's slots into a new executable graph.
  void capture_graph(const jit::LaunchPlan& plan, PlanMatmuls& matmuls,
                     std::vector<CudaDevice::Function>& functions,
                     const std::vector<double>& params, Graph& g);
  // Gives the graph's launches this call's scalars where they differ from the last call's,
  // bit for bit (same_bits): each launch that reads a changed one gets its Params again, in
  // place, so a step counter or a temperature neither re-captures nor re-instantiates.
  void update_scalars(const std::vector<double>& params, Graph& g);

  CudaDevice& device_;
  PlanLauncher& launcher_;
  absl::flat_hash_map<const jit::LaunchPlan*, Graph> graphs_;  // guarded by the stream mutex
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_GRAPH_REPLAY_H_
