// GraphReplay (graph_replay.h): capturing a plan's launches as a CUDA graph, launching it,
// and writing changed scalars into its launches in place.
#include "runtime/cuda/graph_replay.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/stats_counters.h"
#include "kiln/error.h"

namespace kiln::runtime::cuda {
namespace {

// Whether two scalars are the same bits. Scalars are compared this way, never with ==: a NaN
// equals itself, -0 differs from 0, and a random seed (64 bits held in a double) is its bits.
bool same_bits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool has_collective(const jit::LaunchPlan& plan) {
  return std::any_of(plan.kernels.begin(), plan.kernels.end(), [](const jit::PlannedKernel& k) {
    return k.program->anchor == jit::AnchorKind::kCollective;
  });
}

bool graphs_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("KILN_CUDA_GRAPHS");
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

}  // namespace

bool GraphReplay::captures(const jit::LaunchPlan& plan) {
  return !(plan.kernels.size() < 2 || !graphs_enabled() || has_collective(plan));
}

std::vector<std::shared_ptr<base::Buffer>> GraphReplay::replay(
    const std::shared_ptr<const jit::LaunchPlan>& plan, const jit::PlanArguments& args,
    const std::vector<std::shared_ptr<base::Buffer>>& inputs) {
  device_.make_current();
  PlanMatmuls& matmuls = launcher_.matmuls_of(*plan);
  std::vector<CudaDevice::Function> functions = device_.prepare(*plan, matmuls.on_cublaslt);
  Graph& g = graph_for(plan);
  if (g.broken) return launcher_.run_placed(*plan, args, inputs, &matmuls);
  bool capture = g.exec == nullptr;
  for (size_t slot = 0; slot < plan->input_nodes.size(); ++slot) {
    const std::shared_ptr<base::Buffer>& given = inputs[slot];
    if (g.slots[slot] == nullptr) {
      g.slots[slot] = given;
      capture = true;
    } else if (g.slots[slot] != given) {
      if (!g.copied[slot]) {
        g.slots[slot] = device_.allocate(given->nbytes());
        g.copied[slot] = true;
        capture = true;
      }
      launcher_.copy_on_device(*g.slots[slot], *given);
    }
  }
  if (!g.ran_uncaptured) {
    g.ran_uncaptured = true;
    return launcher_.run_placed(*plan, args, inputs, &matmuls);
  }
  const bool gathers = PlanLauncher::plan_gathers(*plan);
  if (gathers) launcher_.reset_index_error();  // before the graph in stream order, never inside
  try {
    if (capture) {
      capture_graph(*plan, matmuls, functions, args.params, g);
    } else {
      update_scalars(args.params, g);
    }
  } catch (const Error& e) {
    // An untested driver or an unsupported launch must not break a working function:
    // this plan replays without a graph from now on, and says so once.
    std::fprintf(stderr,
                 "[kiln] CUDA graph capture or update failed, replaying kernel by kernel: %s\n",
                 e.what());
    g.broken = true;
  }
  if (g.broken) return launcher_.run_placed(*plan, args, inputs, &matmuls);
  throw_if_failed(device_.api().graph_launch(g.exec, device_.stream()), "cuGraphLaunch",
                  device_.name());
  base::counters().kernels_launched += g.launches;
  if (device_.syncs_each_call()) {
    std::vector<std::string> kernels;
    for (const jit::PlannedKernel& k : plan->kernels) kernels.push_back(k.program->name);
    device_.checked(absl::StrCat("graph of ", g.launches, " launches (kernels ",
                                 absl::StrJoin(kernels, ", "), ")"));
  }
  if (gathers) launcher_.check_index_error();
  std::vector<std::shared_ptr<base::Buffer>> results;
  for (const std::shared_ptr<base::Buffer>& out : g.outputs) {
    results.push_back(device_.allocate(out->nbytes()));
    launcher_.copy_on_device(*results.back(), *out);
  }
  return results;
}

GraphReplay::Graph& GraphReplay::graph_for(const std::shared_ptr<const jit::LaunchPlan>& plan) {
  if (graphs_.size() >= 64) {  // forget the graphs of plans nobody holds any more
    for (auto it = graphs_.begin(); it != graphs_.end();) {
      if (it->second.plan.expired()) {
        destroy(it->second);
        graphs_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  Graph& g = graphs_[plan.get()];
  if (g.plan.lock() != plan) {
    destroy(g);
    g = Graph{};
    g.plan = plan;
    g.slots.resize(plan->input_nodes.size());
    g.copied.assign(plan->input_nodes.size(), false);
  }
  return g;
}

void GraphReplay::destroy(Graph& g) {
  if (g.exec != nullptr) {
    report_if_failed(device_.api().graph_exec_destroy(g.exec), "cuGraphExecDestroy",
                     device_.name());
  }
  if (g.graph != nullptr) {
    report_if_failed(device_.api().graph_destroy(g.graph), "cuGraphDestroy", device_.name());
  }
  g.exec = nullptr;
  g.graph = nullptr;
  g.captured.scalar_launches.clear();
}

void GraphReplay::capture_graph(const jit::LaunchPlan& plan, PlanMatmuls& matmuls,
                                std::vector<CudaDevice::Function>& functions,
                                const std::vector<double>& params, Graph& g) {
  destroy(g);
  g.captured.owned.clear();
  Buffers buffers;
  for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
    buffers[plan.input_nodes[slot]] = g.slots[slot];
  }
  const DriverApi& d = device_.api();
  device_.begin_capture();
  const int64_t launched_before = base::counters().kernels_launched;
  CUgraph graph = nullptr;
  try {
    launcher_.launch_kernels(plan, matmuls, functions, params, /*donated=*/{}, buffers,
                             &g.captured);
  } catch (...) {
    // The launch's error is the one to raise; these only clean up after it.
    report_if_failed(device_.end_capture(&graph), "cuStreamEndCapture", device_.name());
    if (graph != nullptr)
      report_if_failed(d.graph_destroy(graph), "cuGraphDestroy", device_.name());
    throw;
  }
  g.launches = base::counters().kernels_launched - launched_before;
  base::counters().kernels_launched -= g.launches;  // captured, not run: replay counts them
  throw_if_failed(device_.end_capture(&graph), "cuStreamEndCapture", device_.name());
  if (const CUresult made = d.graph_instantiate(&g.exec, graph, 0); made != 0) {
    g.exec = nullptr;
    report_if_failed(d.graph_destroy(graph), "cuGraphDestroy", device_.name());
    throw_if_failed(made, "cuGraphInstantiateWithFlags", device_.name());
  }
  g.graph = graph;
  g.params = params;
  g.outputs.clear();
  for (int o : plan.outputs) g.outputs.push_back(buffers.at(o));
}

void GraphReplay::update_scalars(const std::vector<double>& params, Graph& g) {
  if (same_bits(params, g.params)) return;
  for (ScalarLaunch& s : g.captured.scalar_launches) {
    bool changed = false;
    for (size_t i = 0; i < s.plan_params.size(); ++i) {
      const double value = params[s.plan_params[i]];
      changed = changed || !same_bits(value, g.params[s.plan_params[i]]);
      std::memcpy(s.block.data() + s.offset + sizeof(double) * i, &value, sizeof value);
    }
    if (!changed) continue;
    void* kernel_args[] = {s.block.data(), &s.split};
    KernelNodeParams launch = s.launch;
    launch.kernel_params = kernel_args;
    throw_if_failed(device_.api().graph_exec_kernel_node_set_params(g.exec, s.node, &launch),
                    "cuGraphExecKernelNodeSetParams_v2",
                    absl::StrCat(device_.name(), " kernel ", s.kernel));
  }
  g.params = params;
}

}  // namespace kiln::runtime::cuda
