// Device selection: KILN_DEVICE, the default device, and the built-in backends.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"

namespace kiln {
namespace {

std::mutex device_mutex;
std::optional<Device> chosen_device;

// The index N of "cuda:N", or nullopt when N is not a non-negative decimal integer.
std::optional<int> parse_index(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int index = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + (c - '0');
  }
  return index;
}

}  // namespace

std::string device_name(Device d) {
  return d.type == DeviceType::CPU ? "cpu" : absl::StrCat("cuda:", d.index);
}

Device default_device() {
  std::lock_guard<std::mutex> lock(device_mutex);
  if (!chosen_device) {
    const char* env = std::getenv("KILN_DEVICE");
    chosen_device = runtime::device_from_setting(env == nullptr ? "auto" : env);
  }
  return *chosen_device;
}

void set_default_device(Device d) {
  if (absl::Status s = runtime::device_usable(d); !s.ok()) {
    throw Error(absl::StrCat("set_default_device(", device_name(d), "): ", s.message()));
  }
  std::lock_guard<std::mutex> lock(device_mutex);
  chosen_device = d;
}

namespace runtime {

void register_builtin_backends() {
  BackendFactory cpu;
  cpu.name = "CPU";
  cpu.device_count = []() -> absl::StatusOr<int> { return 1; };
  cpu.make = [](int) { return make_cpu_backend(); };
  register_backend(DeviceType::CPU, std::move(cpu));
  register_backend(DeviceType::CUDA, cuda::cuda_backend_factory());
}

Device device_from_setting(const std::string& setting) {
  const Device cuda0{DeviceType::CUDA, 0};
  if (setting.empty() || setting == "auto") {
    return device_usable(cuda0).ok() ? cuda0 : Device{DeviceType::CPU, 0};
  }
  if (setting == "cpu") return Device{DeviceType::CPU, 0};
  const bool indexed = setting.rfind("cuda:", 0) == 0;
  if (!indexed && setting != "cuda") {
    throw Error("KILN_DEVICE='" + setting + "' is not one of cpu, cuda, cuda:N, auto");
  }
  Device d = cuda0;
  if (indexed) {
    std::optional<int> index = parse_index(std::string_view(setting).substr(5));
    if (!index) {
      throw Error("KILN_DEVICE='" + setting +
                  "': the CUDA device index must be a non-negative integer, as in cuda:0");
    }
    d.index = *index;
  }
  absl::Status s = device_usable(d);
  if (s.ok()) return d;
  if (s.code() == absl::StatusCode::kOutOfRange) {
    throw Error(absl::StrCat("KILN_DEVICE=", setting, ": ", s.message()));
  }
  throw Error(absl::StrCat("KILN_DEVICE=", setting, " but no CUDA device is usable (", s.message(),
                           "); set KILN_DEVICE=cpu or auto"));
}

}  // namespace runtime
}  // namespace kiln
