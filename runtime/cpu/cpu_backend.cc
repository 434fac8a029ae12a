// The CPU device's backend: kernels in plan order, intermediates recycled by size.
#include "runtime/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/env_options.h"
#include "base/stats_counters.h"
#include "jit/backend/backend.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/kernel_executor.h"
#include "runtime/cpu/kernel_families.h"

namespace kiln::runtime::cpu {
namespace {

// Bytes a kernel moves: every input and output buffer once.
int64_t traffic_bytes(const jit::LaunchPlan& plan, size_t k) {
  int64_t bytes = 0;
  const jit::KernelLaunch& launch = plan.kernels[k].launch;
  for (int n : launch.inputs) bytes += plan.node_bytes[n];
  for (int n : launch.outputs) bytes += plan.node_bytes[n];
  return bytes;
}

// Arithmetic a kernel does: one op per element per instruction, 2mnk for a matmul.
double flops(const jit::KernelProgram& program, const jit::KernelLaunch& launch) {
  double total = 0;
  for (const jit::Instr& in : program.instrs) {
    if (in.kind == jit::InstrKind::kUnary || in.kind == jit::InstrKind::kBinary ||
        in.kind == jit::InstrKind::kWhere) {
      total += static_cast<double>(ops::numel(launch.spaces[in.space]));
    }
  }
  if (program.anchor == jit::AnchorKind::kMatmul) {
    const ops::Shape& a = launch.spaces[1];
    total +=
        2.0 * static_cast<double>(ops::numel(launch.spaces[0])) * static_cast<double>(a.back());
  } else if (program.anchor != jit::AnchorKind::kNone) {
    total += static_cast<double>(ops::numel(launch.spaces[1]));
  }
  return total;
}

// A buffer of `bytes` from the released intermediates when one fits exactly, else a new one.
std::shared_ptr<base::Buffer> recycled(std::multimap<int64_t, std::shared_ptr<base::Buffer>>& pool,
                                       int64_t bytes) {
  auto it = pool.find(bytes);
  if (it == pool.end()) return std::make_shared<base::Buffer>(bytes);
  std::shared_ptr<base::Buffer> b = std::move(it->second);
  pool.erase(it);
  return b;
}

class CpuBackend final : public jit::Backend {
 public:
  void prepare(const jit::LaunchPlan& plan, const jit::PlanArguments& constants) override {
    absl::flat_hash_map<int, const base::Buffer*> bound;
    for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
      const base::Buffer* buffer = constants.inputs[slot].get();
      if (buffer != nullptr && !buffer->on_device()) bound[plan.input_nodes[slot]] = buffer;
    }
    for (const jit::PlannedKernel& pk : plan.kernels) {
      if (pk.program->anchor != jit::AnchorKind::kMatmul) continue;
      std::vector<const base::Buffer*> ins;
      for (int n : pk.launch.inputs) {
        const auto it = bound.find(n);
        ins.push_back(it == bound.end() ? nullptr : it->second);
      }
      prepare_matmul_weight(*pk.program, pk.launch, ins);
    }
  }

  std::vector<std::shared_ptr<base::Buffer>> run(const jit::LaunchPlan& plan,
                                                 const jit::PlanArguments& args) override {
    absl::flat_hash_map<int, std::shared_ptr<base::Buffer>> buffers;
    for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
      buffers[plan.input_nodes[slot]] =
          jit::place_on(args.inputs[slot], Device{DeviceType::CPU, 0});
    }
    std::multimap<int64_t, std::shared_ptr<base::Buffer>> pool;  // released intermediates by size
    const int log_level = base::env_options().log_level;
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      const jit::PlannedKernel& pk = plan.kernels[k];
      const jit::KernelLaunch& launch = pk.launch;
      std::vector<const base::Buffer*> ins;
      for (int n : launch.inputs) ins.push_back(buffers.at(n).get());
      std::vector<base::Buffer*> outs;
      const jit::OutputStart output_start = jit::output_start(plan, args.donated, k);
      for (int n : launch.outputs) {
        if (output_start == jit::OutputStart::kNew) {
          buffers[n] = recycled(pool, plan.node_bytes[n]);
        } else if (output_start == jit::OutputStart::kXInPlace) {
          // x's own buffer, written in place. Copied out first: `buffers[n]` may insert and
          // rehash, which would leave a reference into the map dangling. An intermediate x
          // leaves the map, so that its release does not hand the buffer to the pool.
          const int x_node = launch.inputs[0];
          std::shared_ptr<base::Buffer> x = buffers.at(x_node);
          if (std::find(plan.input_nodes.begin(), plan.input_nodes.end(), x_node) ==
              plan.input_nodes.end()) {
            buffers.erase(x_node);
          }
          buffers[n] = std::move(x);
        } else {
          buffers[n] = recycled(pool, plan.node_bytes[n]);  // a copy of x
          std::memcpy(buffers[n]->data(), ins[0]->data(), static_cast<size_t>(ins[0]->nbytes()));
        }
        buffers[n]->mark_written();
        outs.push_back(buffers[n].get());
      }
      std::vector<double> params;
      params.reserve(launch.params.size());
      for (int p : launch.params) params.push_back(args.params[p]);
      const auto start = std::chrono::steady_clock::now();
      cpu::execute_kernel(*pk.program, launch, ins, outs, params);
      base::counters().kernels_launched += 1;
      if (log_level >= 2) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::vector<std::string> nodes;
        for (int n : launch.nodes) nodes.push_back(absl::StrCat("%", n));
        // A custom kernel's traffic and arithmetic are the user's own: no figures for it.
        const std::string rates =
            pk.program->anchor == jit::AnchorKind::kCustomKernel ? std::string("(custom kernel)")
            : pk.program->anchor == jit::AnchorKind::kCollective
                ? absl::StrFormat(
                      "(collective, %.2f GB/s of this rank's bytes)",
                      static_cast<double>(plan.node_bytes[launch.outputs[0]]) / s * 1e-9)
                : absl::StrFormat("%.2f GB/s %.2f GFLOP/s", traffic_bytes(plan, k) / s * 1e-9,
                                  flops(*pk.program, launch) / s * 1e-9);
        // "(C++ loop)": the kernel ran as a compiled loop (docs/cpu_codegen.md).
        const bool loop = (pk.program->anchor == jit::AnchorKind::kNone ||
                           pk.program->anchor == jit::AnchorKind::kUpdateSlice ||
                           pk.program->anchor == jit::AnchorKind::kArgReduce) &&
                          cpu::last_kernel_ran_compiled_loop();
        std::fprintf(stderr, "kiln:   kernel %s%s nodes [%s] %s %.3f ms %s\n",
                     pk.program->name.c_str(), loop ? " (C++ loop)" : "",
                     absl::StrJoin(nodes, " ").c_str(),
                     pk.compiled_here && args.plan_built_now ? "compiled" : "cache-hit", s * 1e3,
                     rates.c_str());
      }
      for (int n : plan.release_after[k]) {
        auto it = buffers.find(n);
        if (it == buffers.end()) continue;  // handed over to this kernel's output
        pool.emplace(it->second->nbytes(), std::move(it->second));
        buffers.erase(it);
      }
    }
    std::vector<std::shared_ptr<base::Buffer>> results;
    results.reserve(plan.outputs.size());
    for (int o : plan.outputs) results.push_back(buffers.at(o));
    return results;
  }
};

}  // namespace

std::unique_ptr<jit::Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kiln::runtime::cpu
