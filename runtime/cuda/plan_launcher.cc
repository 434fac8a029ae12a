// PlanLauncher (plan_launcher.h): a plan's kernels launched one after another on the
// device's stream, with their buffers, Params, schedules, cuBLASLt calls and the index error
// word.
#include "runtime/cuda/plan_launcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/stats_counters.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/launch_geometry.h"

namespace kiln::runtime::cuda {

bool PlanMatmuls::describes(const jit::LaunchPlan& plan) const {
  if (programs.size() != plan.kernels.size()) return false;
  for (size_t k = 0; k < programs.size(); ++k) {
    if (programs[k] != plan.kernels[k].program) return false;
  }
  for (const auto& [k, decided] : launches) {
    const jit::KernelLaunch& launch = plan.kernels[k].launch;
    if (launch.spaces != decided.spaces || launch.views.size() != decided.views.size()) {
      return false;
    }
    for (size_t v = 0; v < launch.views.size(); ++v) {
      if (launch.views[v].strides != decided.views[v].strides ||
          launch.views[v].offset != decided.views[v].offset) {
        return false;
      }
    }
  }
  return true;
}

std::vector<std::shared_ptr<base::Buffer>> PlanLauncher::run_placed(
    const jit::LaunchPlan& plan, const jit::PlanArguments& args,
    const std::vector<std::shared_ptr<base::Buffer>>& inputs, PlanMatmuls* matmuls) {
  device_.make_current();
  if (matmuls == nullptr) matmuls = &matmuls_of(plan);
  std::vector<CudaDevice::Function> functions = device_.prepare(plan, matmuls->on_cublaslt);
  Buffers buffers;
  for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
    buffers[plan.input_nodes[slot]] = inputs[slot];
  }
  const bool gathers = plan_gathers(plan);
  if (gathers) reset_index_error();
  launch_kernels(plan, *matmuls, functions, args.params, args.donated, buffers,
                 /*capture=*/nullptr);
  if (gathers) check_index_error();
  std::vector<std::shared_ptr<base::Buffer>> results;
  for (int o : plan.outputs) results.push_back(buffers.at(o));
  return results;
}

void PlanLauncher::launch_kernels(const jit::LaunchPlan& plan, PlanMatmuls& matmuls,
                                  std::vector<CudaDevice::Function>& functions,
                                  const std::vector<double>& plan_params,
                                  const std::vector<bool>& donated, Buffers& buffers,
                                  CaptureRecord* capture) {
  auto allocate = [&](int64_t bytes) {
    std::shared_ptr<base::Buffer> b = device_.allocate(bytes);
    if (capture != nullptr) capture->owned.push_back(b);
    return b;
  };
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const jit::PlannedKernel& pk = plan.kernels[k];
    const jit::KernelLaunch& launch = pk.launch;
    std::vector<uint64_t> ins, outs;
    for (int n : launch.inputs) ins.push_back(buffers.at(n)->device_pointer());
    const jit::OutputStart start = jit::output_start(plan, donated, k);
    for (int n : launch.outputs) {
      if (start == jit::OutputStart::kNew) {
        buffers[n] = allocate(plan.node_bytes[n]);
      } else if (start == jit::OutputStart::kXInPlace) {
        // x's own buffer (donated, or an intermediate read last here). Copied out first:
        // `buffers[n]` may insert and rehash, which would leave a reference into the map
        // dangling.
        std::shared_ptr<base::Buffer> x = buffers.at(launch.inputs[0]);
        buffers[n] = std::move(x);
      } else {
        buffers[n] = allocate(plan.node_bytes[n]);
        copy_on_device(*buffers[n], *buffers.at(launch.inputs[0]));
      }
      outs.push_back(buffers[n]->device_pointer());
    }
    if (pk.program->anchor == jit::AnchorKind::kCollective) {
      // Never captured: replay() runs plans with collectives without a graph.
      device_.collectives().run(*pk.program, launch, ins.empty() ? 0 : ins[0], outs[0]);
      base::counters().kernels_launched += 1;
      for (int n : plan.release_after[k]) buffers.erase(n);
      continue;
    }
    if (functions[k].handle == nullptr) {  // planned on cuBLASLt
      if (launch_cublaslt(pk, *matmuls.gemms[k], ins, outs, matmuls.last_calls[k])) {
        for (int n : plan.release_after[k]) buffers.erase(n);
        continue;
      }
      functions[k] = device_.prepare_kernel(plan, k);
    }
    if (pk.program->anchor == jit::AnchorKind::kCustomKernel) {
      launch_custom(functions[k].handle, pk.program.get(), launch, ins, outs[0]);
    } else {
      std::vector<double> params;
      for (int p : launch.params) params.push_back(plan_params[p]);
      std::vector<std::byte> block =
          pack_params(*pk.program, launch, ins, outs, params,
                      index_error_ != nullptr ? index_error_->device_pointer() : 0);
      const LaunchSchedule schedule = schedule_launches(*pk.program, launch, device_.sm_count(),
                                                        functions[k].dynamic_shared_limit);
      std::shared_ptr<base::Buffer> scratch;
      if (schedule.scratch_bytes > 0) scratch = allocate(schedule.scratch_bytes);
      for (const LaunchStep& step : schedule.steps) {
        SplitArgs split{scratch ? scratch->device_pointer() : 0, step.chunks, step.phase};
        const int64_t grid[3] = {step.grid_x, step.grid_y, 1};
        const int threads[3] = {step.block, 1, 1};
        void* kernel_args[] = {block.data(), &split};
        device_.launch(functions[k].handle, grid, threads, step.shared_bytes, kernel_args,
                       pk.program->name);
        if (capture != nullptr && !launch.params.empty()) {
          ScalarLaunch& s = capture->scalar_launches.emplace_back();
          s.node = device_.captured_node();
          s.launch.function = functions[k].handle;
          for (int d = 0; d < 3; ++d) {
            s.launch.grid[d] = static_cast<unsigned>(grid[d]);
            s.launch.block[d] = static_cast<unsigned>(threads[d]);
          }
          s.launch.shared_bytes = static_cast<unsigned>(step.shared_bytes);
          s.block = block;
          s.split = split;
          s.offset = params_layout(*pk.program).p;
          s.plan_params = launch.params;
          s.kernel = pk.program->name;
        }
      }
    }
    for (int n : plan.release_after[k]) buffers.erase(n);
  }
}

PlanMatmuls& PlanLauncher::matmuls_of(const jit::LaunchPlan& plan) {
  const uint64_t generation = cublaslt_api_generation();
  std::unique_ptr<PlanMatmuls>& m = plan_matmuls_[&plan];
  if (m != nullptr && m->generation == generation && m->describes(plan)) return *m;
  if (m == nullptr && plan_matmuls_.size() > kMaxPlanMatmuls) {
    // Plans nobody holds cannot be told from live ones here: forget them all; each live
    // plan decides again (cheaply: cuBLASLt keeps its problems) on its next run.
    plan_matmuls_.clear();
    return matmuls_of(plan);
  }
  m = std::make_unique<PlanMatmuls>();
  m->generation = generation;
  m->on_cublaslt.assign(plan.kernels.size(), false);
  m->gemms.resize(plan.kernels.size());
  m->last_calls.resize(plan.kernels.size());
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const jit::PlannedKernel& pk = plan.kernels[k];
    m->programs.push_back(pk.program);
    if (pk.program->anchor != jit::AnchorKind::kMatmul) continue;
    m->launches.emplace_back(k, pk.launch);
    MatmulChoice c = device_.cublaslt().choose(*pk.program, pk.launch);
    m->on_cublaslt[k] = c.cublaslt();
    m->gemms[k] = c.gemm;
  }
  // The choice asked cuBLASLt's heuristic but allocated nothing (plan builds call it too,
  // through describe_plan); the workspace is made here, on the first run, before any graph
  // capture. Without one the generated kernels run, as the choice now says for later plans.
  if (std::find(m->on_cublaslt.begin(), m->on_cublaslt.end(), true) != m->on_cublaslt.end() &&
      !device_.cublaslt().prepare_to_run().ok()) {
    m->on_cublaslt.assign(plan.kernels.size(), false);
    for (std::optional<CublasLtGemm>& gemm : m->gemms) gemm.reset();
  }
  return *m;
}

void PlanLauncher::copy_on_device(const base::Buffer& to, const base::Buffer& from) {
  if (from.nbytes() == 0) return;
  throw_if_failed(
      device_.api().memcpy_dtod_async(to.device_pointer(), from.device_pointer(),
                                      static_cast<size_t>(from.nbytes()), device_.stream()),
      "cuMemcpyDtoDAsync", device_.name());
  if (device_.syncs_each_call()) {
    device_.checked(absl::StrCat("copy of ", from.nbytes(), " bytes on the device"));
  }
}

void PlanLauncher::reset_index_error() {
  static const IndexErrorWord kZero;
  if (index_error_ == nullptr) index_error_ = device_.allocate(sizeof(IndexErrorWord));
  throw_if_failed(device_.api().memcpy_htod_async(index_error_->device_pointer(), &kZero,
                                                  sizeof kZero, device_.stream()),
                  "cuMemcpyHtoDAsync", device_.name());
  device_.checked("copy of the index error word to the device");
}

void PlanLauncher::check_index_error() {
  IndexErrorWord word;
  throw_if_failed(device_.api().memcpy_dtoh_async(&word, index_error_->device_pointer(),
                                                  sizeof word, device_.stream()),
                  "cuMemcpyDtoHAsync", device_.name());
  device_.synchronize();
  throw_if_index_error(word);
}

bool PlanLauncher::plan_gathers(const jit::LaunchPlan& plan) {
  for (const jit::PlannedKernel& k : plan.kernels) {
    if (has_gathers(*k.program)) return true;
  }
  return false;
}

bool PlanLauncher::launch_cublaslt(const jit::PlannedKernel& pk, const CublasLtGemm& gemm,
                                   const std::vector<uint64_t>& ins,
                                   const std::vector<uint64_t>& outs,
                                   CublasLtMatmuls::LastCall& last) {
  if (!device_.cublaslt().run(gemm, KernelPointers{ins, outs}, device_.stream(), &last).ok()) {
    return false;
  }
  base::counters().kernels_launched += 1;
  device_.checked(absl::StrCat("cuBLASLt matmul ", pk.program->name));
  return true;
}

void PlanLauncher::launch_custom(CUfunction f, const jit::KernelProgram* program,
                                 const jit::KernelLaunch& launch, const std::vector<uint64_t>& ins,
                                 uint64_t out) {
  CustomKernelCall call = prepare_custom_kernel_call(*program, launch, ins, out);
  void* args[] = {call.args.data()};
  device_.launch(f, call.geometry.grid, call.geometry.block, call.geometry.shared_bytes, args,
                 ops::custom_kernel(program->anchor_attrs.function)->name);
}

}  // namespace kiln::runtime::cuda
