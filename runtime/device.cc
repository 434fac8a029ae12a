// Device selection: KILN_DEVICE, the default device, and the built-in backends.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/thread_pool.h"
#include "jit/backend/backend.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cuda/cuda_backend.h"

namespace kiln {
namespace {

std::mutex device_mutex;
std::optional<Device> chosen_device;

}  // namespace

std::string device_name(Device d) {
  return d.type == DeviceType::CPU ? "cpu" : absl::StrCat("cuda:", d.index);
}

Device default_device() {
  std::lock_guard<std::mutex> lock(device_mutex);
  if (!chosen_device) {
    const char* env = std::getenv("KILN_DEVICE");
    chosen_device = jit::device_from_setting(env == nullptr ? "auto" : env);
  }
  return *chosen_device;
}

void set_default_device(Device d) {
  if (absl::Status s = jit::device_usable(d); !s.ok()) {
    throw Error(absl::StrCat("set_default_device(", device_name(d), "): ", s.message()));
  }
  std::lock_guard<std::mutex> lock(device_mutex);
  chosen_device = d;
}

void set_num_threads(int n) { base::set_worker_count(n); }
int num_threads() { return base::worker_count(); }

namespace jit {

void register_builtin_backends() {
  BackendFactory cpu;
  cpu.name = "CPU";
  cpu.device_count = []() -> absl::StatusOr<int> { return 1; };
  cpu.make = [](int) { return runtime::cpu::make_cpu_backend(); };
  cpu.setting = "cpu";
  cpu.machine_code = runtime::cpu::cpu_machine_code_store();
  register_backend(DeviceType::CPU, std::move(cpu));
  register_backend(DeviceType::CUDA, runtime::cuda::cuda_backend_factory());
}

}  // namespace jit
}  // namespace kiln
