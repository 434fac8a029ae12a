// Runs a launch plan's kernels through the CUDA host emulation (cuda_emulation.h) as the CUDA
// backend would launch them: the same packed arguments, the same launch schedule, outputs
// poisoned beforehand. Shared by the tests that compare emulated kernels with another device.
#ifndef KILN_TESTS_CUDA_EMULATION_RUN_EMULATED_H_
#define KILN_TESTS_CUDA_EMULATION_RUN_EMULATED_H_

#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/buffer.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/tensor.h"
#include "ops/collective.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/launch_geometry.h"
#include "tests/cuda_emulation/emulated_kernels.h"

namespace kiln::testing {

// The emulated GPU's SM count: small, so grid-stride loops and the block cap are exercised.
inline constexpr int kEmulatedSms = 2;
// The dynamic shared memory a launch may take: a GPU that has not opted in (48 KiB), less the
// row norms' static `__shared__ double shared[32]`.
inline constexpr int kEmulatedDynamicSharedLimit = 48 * 1024 - 256;

// How a plan runs: the 64- or 32-bit entry points, with or without the dynamic shared
// memory the backend gives (row norms take another path without it), with or without
// reductions split over several blocks per output.
struct EmulationVariant {
  bool wide;
  bool shared;
  bool split;
  std::string name() const {
    return absl::StrCat(wide ? "i64" : "i32", " entry, ", shared ? "with" : "no",
                        " dynamic shared memory, ", split ? "split" : "unsplit", " reductions");
  }
};

// The variants every plan runs under: between them, every path a launch can take.
inline std::vector<EmulationVariant> emulation_variants() {
  return {{false, true, true}, {false, false, false}, {true, true, true}};
}

// The module that runs `program` in the emulation. A custom kernel's own source takes
// KilnKernelArgs rather than (Params, Split), so an adapter gives it the entry points
// EmulatedKernels calls; run_emulated_plan packs its KilnKernelArgs as the backend does.
inline EmulatedModule emulated_module(const jit::KernelProgram& program) {
  std::string source = runtime::cuda::render_cuda(program);
  if (program.anchor != jit::AnchorKind::kCustomKernel) return {source, program.name};
  const std::string name = ops::custom_kernel(program.anchor_attrs.function)->name;
  absl::StrAppend(&source,
                  "struct Params { KilnKernelArgs a; };\n"
                  "struct Split { long long unused[3]; };\n"
                  "inline void kiln_custom_entry_i32(const Params& p, const Split&) { ",
                  name,
                  "(p.a); }\n"
                  "inline void kiln_custom_entry_i64(const Params& p, const Split&) { ",
                  name, "(p.a); }\n");
  return {source, "kiln_custom_entry"};
}

namespace internal {

// A custom kernel's launch, with the geometry its definition asks for.
inline void launch_emulated_custom(const EmulatedKernels& kernels, int module,
                                   const jit::PlannedKernel& pk, const std::vector<uint64_t>& ins,
                                   uint64_t out) {
  // The same geometry and argument block as the backend's launch.
  runtime::cuda::CustomKernelCall call =
      runtime::cuda::prepare_custom_kernel_call(*pk.program, pk.launch, ins, out);
  const ops::CustomKernelLaunch& g = call.geometry;
  // The emulation runs one-dimensional blocks in a two-dimensional grid.
  if (g.grid[2] != 1 || g.block[1] != 1 || g.block[2] != 1) {
    throw std::invalid_argument("the CUDA emulation cannot run custom kernel '" +
                                ops::custom_kernel(pk.program->anchor_attrs.function)->name +
                                "': it needs a 1-D block and a 2-D grid");
  }
  const runtime::cuda::SplitArgs unused;
  kernels.launch(module, /*wide=*/true, call.args.data(), &unused, g.grid[0], g.grid[1], g.block[0],
                 g.shared_bytes);
}

}  // namespace internal

// Runs `plan` over `args` through the emulated kernels (`modules`: per plan kernel, its
// module's index in `kernels`); returns the outputs' buffers.
inline std::vector<std::shared_ptr<base::Buffer>> run_emulated_plan(const EmulatedKernels& kernels,
                                                                    const jit::LaunchPlan& plan,
                                                                    const jit::PlanArguments& args,
                                                                    const std::vector<int>& modules,
                                                                    const EmulationVariant& v) {
  std::map<int, std::shared_ptr<base::Buffer>> buffers;
  runtime::cuda::IndexErrorWord index_error;  // as the backend's device word
  for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
    buffers[plan.input_nodes[slot]] = args.inputs[slot];
  }
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const jit::PlannedKernel& pk = plan.kernels[k];
    std::vector<uint64_t> ins, outs;
    for (int n : pk.launch.inputs) {
      ins.push_back(reinterpret_cast<uint64_t>(buffers.at(n)->data()));
    }
    for (int n : pk.launch.outputs) {
      auto b = std::make_shared<base::Buffer>(plan.node_bytes[n]);
      std::memset(b->data(), 0xff, static_cast<size_t>(b->nbytes()));  // poison
      if (jit::output_starts_as_input(*pk.program)) {                  // starts as x, as on a GPU
        const base::Buffer& x = *buffers.at(pk.launch.inputs[0]);
        std::memcpy(b->data(), x.data(), static_cast<size_t>(x.nbytes()));
      }
      outs.push_back(reinterpret_cast<uint64_t>(b->data()));
      buffers[n] = b;
    }
    if (pk.program->anchor == jit::AnchorKind::kCustomKernel) {
      internal::launch_emulated_custom(kernels, modules[k], pk, ins, outs.at(0));
      continue;
    }
    if (pk.program->anchor == jit::AnchorKind::kCollective) {  // no kernel: the host's part
      const ops::ValueType in{pk.launch.spaces[1], pk.program->anchor_dtype};
      const ops::ValueType out{pk.launch.spaces[0], pk.program->anchor_dtype};
      comm::run_host_collective(
          ops::collective_call(pk.program->anchor_op, pk.program->anchor_attrs, in, out,
                               ins.empty() ? nullptr : reinterpret_cast<const void*>(ins[0]),
                               reinterpret_cast<void*>(outs[0])));
      continue;
    }
    std::vector<double> params;
    for (int p : pk.launch.params) params.push_back(args.params[p]);
    std::vector<std::byte> block = runtime::cuda::pack_params(
        *pk.program, pk.launch, ins, outs, params, reinterpret_cast<uint64_t>(&index_error));
    const runtime::cuda::LaunchSchedule schedule = runtime::cuda::schedule_launches(
        *pk.program, pk.launch, kEmulatedSms, kEmulatedDynamicSharedLimit, v.split);
    std::vector<std::byte> scratch(static_cast<size_t>(schedule.scratch_bytes), std::byte{0xff});
    for (const runtime::cuda::LaunchStep& step : schedule.steps) {
      const runtime::cuda::SplitArgs split{reinterpret_cast<uint64_t>(scratch.data()), step.chunks,
                                           step.phase};
      kernels.launch(modules[k], v.wide, block.data(), &split, step.grid_x, step.grid_y, step.block,
                     v.shared ? step.shared_bytes : 0);
    }
  }
  runtime::cuda::throw_if_index_error(index_error);  // as the backend does after the plan
  std::vector<std::shared_ptr<base::Buffer>> out;
  for (int n : plan.outputs) out.push_back(buffers.at(n));
  return out;
}

// Lazy results planned as a sync would plan each, with their kernels' modules gathered for
// one EmulatedKernels::build; then each plan runs through the emulation on its own.
struct EmulatedPlans {
  std::vector<std::shared_ptr<const jit::LaunchPlan>> plans;
  std::vector<jit::PlanArguments> args;
  std::vector<EmulatedModule> modules;           // for EmulatedKernels::build
  std::vector<std::vector<int>> kernel_modules;  // per plan, per kernel: its module's index

  // Plans `result` (still lazy) as plan number plans.size().
  void add(const Tensor& result) {
    const jit::Trace trace = jit::build_trace({detail::TensorAccess::node(result).get()});
    plans.push_back(jit::build_plan(trace));
    args.push_back(jit::arguments_of(trace));
    kernel_modules.emplace_back();
    for (const jit::PlannedKernel& pk : plans.back()->kernels) {
      kernel_modules.back().push_back(static_cast<int>(modules.size()));
      modules.push_back(emulated_module(*pk.program));
    }
  }

  // Runs plan `i` through `kernels` (built from `modules`); its outputs' buffers.
  std::vector<std::shared_ptr<base::Buffer>> run(const EmulatedKernels& kernels, size_t i,
                                                 const EmulationVariant& v) const {
    return run_emulated_plan(kernels, *plans[i], args[i], kernel_modules[i], v);
  }
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_CUDA_EMULATION_RUN_EMULATED_H_
