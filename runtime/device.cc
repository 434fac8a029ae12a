// Device selection: KILN_DEVICE, the default device, and the backend for each device.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "runtime/backend.h"

namespace kiln {
namespace {

// The CUDA device arrives with the CUDA backend; until then no CUDA device is usable.
bool cuda_usable() { return false; }

Device device_from_environment() {
  const char* env = std::getenv("KILN_DEVICE");
  std::string choice = env == nullptr ? "auto" : env;
  if (choice.empty() || choice == "auto") {
    return cuda_usable() ? Device{DeviceType::CUDA, 0} : Device{DeviceType::CPU, 0};
  }
  if (choice == "cpu") return Device{DeviceType::CPU, 0};
  if (choice == "cuda" || choice.rfind("cuda:", 0) == 0) {
    if (!cuda_usable()) {
      throw Error("KILN_DEVICE=" + choice +
                  " but no CUDA device is usable (this build runs kernels on the CPU only; "
                  "set KILN_DEVICE=cpu or auto)");
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
  throw Error(absl::StrCat("device ", device_name(d), " is not usable in this build"));
}

}  // namespace runtime
}  // namespace kiln
