// Device selection: KILN_DEVICE, the default device, and the backend for each device.
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"

namespace kiln {
namespace {

// Whether CUDA device 0 can run kernels (checked once: the driver, a GPU, NVRTC).
bool cuda_usable() {
  static const bool usable = runtime::cuda::cuda_available().ok();
  return usable;
}

std::string cuda_unusable_reason() {
  absl::Status s = runtime::cuda::cuda_available();
  return s.ok() ? "" : std::string(s.message());
}

Device device_from_environment() {
  const char* env = std::getenv("KILN_DEVICE");
  std::string choice = env == nullptr ? "auto" : env;
  if (choice.empty() || choice == "auto") {
    return cuda_usable() ? Device{DeviceType::CUDA, 0} : Device{DeviceType::CPU, 0};
  }
  if (choice == "cpu") return Device{DeviceType::CPU, 0};
  if (choice == "cuda" || choice.rfind("cuda:", 0) == 0) {
    if (!cuda_usable()) {
      throw Error("KILN_DEVICE=" + choice + " but no CUDA device is usable (" +
                  cuda_unusable_reason() + "); set KILN_DEVICE=cpu or auto");
    }
    return Device{DeviceType::CUDA, 0};
  }
  throw Error("KILN_DEVICE='" + choice + "' is not one of cpu, cuda, auto");
}

std::mutex device_mutex;
std::optional<Device> chosen_device;

}  // namespace

std::string device_name(Device d) {
  return d.type == DeviceType::CPU ? "cpu" : absl::StrCat("cuda:", d.index);
}

Device default_device() {
  std::lock_guard<std::mutex> lock(device_mutex);
  if (!chosen_device) chosen_device = device_from_environment();
  return *chosen_device;
}

void set_default_device(Device d) {
  if (d.type == DeviceType::CUDA && !cuda_usable()) {
    throw Error("set_default_device(" + device_name(d) + "): no CUDA device is usable");
  }
  std::lock_guard<std::mutex> lock(device_mutex);
  chosen_device = d;
}

namespace runtime {

Backend& backend_for(Device d) {
  static std::unique_ptr<Backend> cpu = make_cpu_backend();
  if (d.type == DeviceType::CPU) return *cpu;
  if (!cuda_usable()) {
    throw Error(
        absl::StrCat("device ", device_name(d), " is not usable: ", cuda_unusable_reason()));
  }
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<Backend>>* cuda =
      new std::map<int, std::unique_ptr<Backend>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Backend>& backend = (*cuda)[d.index];
  if (backend == nullptr) backend = cuda::make_cuda_backend(d.index);
  return *backend;
}

}  // namespace runtime
}  // namespace kiln
