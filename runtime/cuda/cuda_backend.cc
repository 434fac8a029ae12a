// The CUDA backend (jit::Backend for one GPU) and its registry entry: describe_plan, run and
// replay over the device (cuda_device.h), the plan launcher (plan_launcher.h) and the graph
// replay (graph_replay.h); the source renderer for dumps; host copies.
#include "runtime/cuda/cuda_backend.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/graph_replay.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/plan_launcher.h"

namespace kiln::runtime::cuda {
namespace {

class CudaBackend final : public jit::Backend {
 public:
  explicit CudaBackend(int index)
      : index_(index),
        device_(CudaDevice::get(index)),
        launcher_(device_),
        graphs_(device_, launcher_) {}

  void synchronize() override {
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    device_.make_current();
    device_.synchronize();
  }

  // For each matmul kernel, "cublaslt (...)" or "generated kernel (why)": what run() does
  // with buffers as the allocator gives them.
  //
  // Called only when explain_plan or KILN_DUMP=plan shows a plan (jit/eval/explain.cc,
  // jit/eval/sync_dump.cc), never while planning. The lines say whether cuBLASLt's heuristic
  // has an algorithm for the problem (or why cublasLtCreate failed), so they need the library
  // and a handle, and the heuristic is asked once per problem (kept, so the plan's first run
  // does not ask again). No device memory: the heuristic is told the workspace's size, and the
  // 32 MiB workspace itself is allocated on the first run that calls cuBLASLt
  // (PlanLauncher::matmuls_of).
  std::string describe_plan(const jit::LaunchPlan& plan) override {
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    device_.make_current();
    std::string matmuls, collectives;
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      const jit::PlannedKernel& pk = plan.kernels[k];
      const std::string kernel = absl::StrCat("  kernel ", k, " (", pk.program->name, "): ");
      if (pk.program->anchor == jit::AnchorKind::kMatmul) {
        absl::StrAppend(&matmuls, kernel,
                        device_.cublaslt().choose(*pk.program, pk.launch).describe(), "\n");
      } else if (pk.program->anchor == jit::AnchorKind::kCollective) {
        absl::StrAppend(&collectives, kernel,
                        device_.collectives().describe(*pk.program, pk.launch), "\n");
      }
    }
    std::string out;
    if (!matmuls.empty()) absl::StrAppend(&out, device_.name(), " matmuls:\n", matmuls);
    if (!collectives.empty()) absl::StrAppend(&out, device_.name(), " collectives:\n", collectives);
    return out;
  }

  std::vector<std::shared_ptr<base::Buffer>> run(const jit::LaunchPlan& plan,
                                                 const jit::PlanArguments& args) override {
    const std::vector<std::shared_ptr<base::Buffer>> inputs = place_inputs(plan, args);
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    return launcher_.run_placed(plan, args, inputs);
  }

  // A plan of several kernels runs as one CUDA graph (graph_replay.h); others as run() does.
  std::vector<std::shared_ptr<base::Buffer>> replay(
      const std::shared_ptr<const jit::LaunchPlan>& plan, const jit::PlanArguments& args) override {
    if (!GraphReplay::captures(*plan)) return run(*plan, args);
    const std::vector<std::shared_ptr<base::Buffer>> inputs = place_inputs(*plan, args);
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    return graphs_.replay(plan, args, inputs);
  }

 private:
  Device here() const { return Device{DeviceType::CUDA, index_}; }

  // The plan's inputs, per slot, on this device. Called before this device's stream mutex
  // is taken: a copy from another GPU holds that GPU's stream mutex, and a thread holding
  // two at once deadlocks with one moving tensors the other way. No thread ever holds two.
  std::vector<std::shared_ptr<base::Buffer>> place_inputs(const jit::LaunchPlan& plan,
                                                          const jit::PlanArguments& args) const {
    std::vector<std::shared_ptr<base::Buffer>> inputs;
    inputs.reserve(plan.input_nodes.size());
    for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
      inputs.push_back(jit::place_on(args.inputs[slot], here()));
    }
    return inputs;
  }

  int index_;
  CudaDevice& device_;
  // Both guarded by the device's stream mutex; the graphs launch through the launcher, so
  // they are made after it and dropped before it.
  PlanLauncher launcher_;
  GraphReplay graphs_;
};

// CUDA C++ for dumps and explain_plan; needs no GPU. Custom source is checked by NVRTC for
// sm_80 where NVRTC loads (a machine without it cannot run the source anyway).
class CudaSourceRenderer final : public jit::SourceRenderer {
 public:
  std::string language() const override { return "CUDA C++"; }
  std::string file_extension() const override { return ".cu"; }
  std::string render(const jit::KernelProgram& program) const override {
    return render_cuda(program);
  }
  absl::Status check(const std::string& source, const std::string& name) const override {
    if (!nvrtc_available().ok()) return absl::OkStatus();
    return compile_to_cubin(source, name, 80).status();
  }
};

}  // namespace

absl::Status cuda_available() {
  absl::StatusOr<std::vector<DeviceInfo>> devices = query_devices();
  if (!devices.ok()) return devices.status();
  if (devices->empty()) return absl::UnavailableError("the CUDA driver sees no GPU");
  if (absl::Status s = nvrtc_available(); !s.ok()) return s;
  return driver_api().status;
}

std::unique_ptr<jit::Backend> make_cuda_backend(int device_index) {
  return std::make_unique<CudaBackend>(device_index);
}

jit::BackendFactory cuda_backend_factory() {
  jit::BackendFactory f;
  f.name = "CUDA";
  f.device_count = []() -> absl::StatusOr<int> {
    if (absl::Status s = cuda_available(); !s.ok()) return s;
    absl::StatusOr<std::vector<DeviceInfo>> devices = query_devices();
    if (!devices.ok()) return devices.status();
    return static_cast<int>(devices->size());
  };
  f.make = make_cuda_backend;
  f.renderer = std::make_shared<CudaSourceRenderer>();
  f.setting = "cuda";
  f.preferred_by_auto = true;
  f.copy_to_host = copy_to_host;
  f.upload = upload;
  return f;
}

std::shared_ptr<base::Buffer> copy_to_host(const base::Buffer& device_buffer) {
  CudaDevice& d = CudaDevice::get(device_buffer.device().index);
  std::lock_guard<std::recursive_mutex> lock(d.stream_mutex());
  d.make_current();
  auto host = std::make_shared<base::Buffer>(device_buffer.nbytes());
  if (device_buffer.nbytes() > 0) {
    throw_if_failed(
        d.api().memcpy_dtoh_async(host->data(), device_buffer.device_pointer(),
                                  static_cast<size_t>(device_buffer.nbytes()), d.stream()),
        "cuMemcpyDtoHAsync", d.name());
    d.checked(absl::StrCat("copy of ", device_buffer.nbytes(), " bytes to the host"));
  }
  d.synchronize();
  return host;
}

std::shared_ptr<base::Buffer> upload(const base::Buffer& host_buffer, Device device) {
  CudaDevice& d = CudaDevice::get(device.index);
  std::lock_guard<std::recursive_mutex> lock(d.stream_mutex());
  d.make_current();
  std::shared_ptr<base::Buffer> out = d.allocate(host_buffer.nbytes());
  if (host_buffer.nbytes() > 0) {
    throw_if_failed(
        d.api().memcpy_htod_async(out->device_pointer(), host_buffer.data(),
                                  static_cast<size_t>(host_buffer.nbytes()), d.stream()),
        "cuMemcpyHtoDAsync", d.name());
    d.checked(absl::StrCat("copy of ", host_buffer.nbytes(), " bytes to the device"));
  }
  // The host buffer may be freed as soon as this returns: wait for the copy.
  d.synchronize();
  return out;
}

}  // namespace kiln::runtime::cuda
