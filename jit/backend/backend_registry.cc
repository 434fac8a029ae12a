// The backend registry: a factory per device type, a backend per device, made on first use.
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/graph/record.h"
#include "kiln/error.h"

namespace kiln::jit {
namespace {

constexpr size_t kDeviceTypes = static_cast<size_t>(DeviceType::CUDA) + 1;
// Devices whose backends are found without a lock (a sync asks for one each time).
constexpr int kFastDevices = 16;

struct Entry {
  std::optional<BackendFactory> factory;
  std::optional<absl::StatusOr<int>> device_count;  // asked once
};

class Registry {
 public:
  Registry() {
    for (auto& per_type : fast_) {
      for (std::atomic<Backend*>& b : per_type) b.store(nullptr, std::memory_order_relaxed);
    }
  }

  void add(DeviceType type, BackendFactory factory) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[slot(type)];
    e.factory = std::move(factory);
    e.device_count.reset();
  }

  absl::Status usable(Device d) {
    std::lock_guard<std::mutex> lock(mutex_);
    return usable_locked(d);
  }

  Backend& backend(Device d) {
    if (d.index >= 0 && d.index < kFastDevices) {
      Backend* b = fast_[slot(d.type)][d.index].load(std::memory_order_acquire);
      if (b != nullptr) return *b;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const std::pair<size_t, int> key{slot(d.type), d.index};
    auto it = backends_.find(key);
    if (it == backends_.end()) {
      if (absl::Status s = usable_locked(d); !s.ok()) {
        throw Error(absl::StrCat("device ", device_name(d), " is not usable: ", s.message()));
      }
      it = backends_.emplace(key, entries_[slot(d.type)].factory->make(d.index)).first;
      if (d.index < kFastDevices) {
        fast_[slot(d.type)][d.index].store(it->second.get(), std::memory_order_release);
      }
    }
    return *it->second;
  }

  std::vector<Backend*> made() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Backend*> out;
    for (const auto& [key, b] : backends_) out.push_back(b.get());
    return out;
  }

  const SourceRenderer* renderer(DeviceType type) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Entry& e = entries_[slot(type)];
    return e.factory ? e.factory->renderer.get() : nullptr;
  }

  const MachineCodeStore* machine_code(DeviceType type) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Entry& e = entries_[slot(type)];
    return e.factory ? e.factory->machine_code.get() : nullptr;
  }

  // The factory registered for `type` (a copy: factories may be replaced meanwhile), or
  // nullopt.
  std::optional<BackendFactory> factory(DeviceType type) {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_[slot(type)].factory;
  }

 private:
  static size_t slot(DeviceType type) { return static_cast<size_t>(type); }

  absl::Status usable_locked(Device d) {
    Entry& e = entries_[slot(d.type)];
    if (!e.factory || !e.factory->make) {
      return absl::UnimplementedError(
          absl::StrCat("no backend is registered for ", device_name(d)));
    }
    if (!e.device_count) e.device_count = e.factory->device_count();
    if (!e.device_count->ok()) return e.device_count->status();
    const int count = **e.device_count;
    if (d.index >= 0 && d.index < count) return absl::OkStatus();
    const std::string name = e.factory->name;
    if (count == 0) return absl::UnavailableError(absl::StrCat("no ", name, " device is usable"));
    return absl::OutOfRangeError(
        absl::StrCat("there is no ", name, " device ", d.index, ": ", count, " ", name,
                     count == 1 ? " device is" : " devices are", " usable (index 0",
                     count == 1 ? "" : absl::StrCat(" to ", count - 1), ")"));
  }

  std::mutex mutex_;
  std::array<Entry, kDeviceTypes> entries_;
  std::map<std::pair<size_t, int>, std::unique_ptr<Backend>> backends_;  // never removed
  std::array<std::array<std::atomic<Backend*>, kFastDevices>, kDeviceTypes> fast_;
};

// True on a thread while it registers the built-in devices (which use register_backend).
thread_local bool registering_builtins = false;

// The process's registry, with the built-in devices registered. Never destroyed: backends
// may be used until the process ends.
Registry& registry() {
  static Registry* r = new Registry();
  static std::once_flag builtins;
  if (!registering_builtins) {
    std::call_once(builtins, [] {
      registering_builtins = true;
      struct Reset {
        ~Reset() { registering_builtins = false; }
      } reset;
      register_builtin_backends();
    });
  }
  return *r;
}

// The factory of `type`'s host copies, throwing when it has none.
BackendFactory copier_for(DeviceType type) {
  std::optional<BackendFactory> f = registry().factory(type);
  if (!f || !f->copy_to_host || !f->upload) {
    throw Error(absl::StrCat("no backend registered for ", device_name(Device{type, 0}),
                             " copies buffers to and from the host"));
  }
  return *std::move(f);
}

// The index N of "name:N", or nullopt when N is not a non-negative decimal integer.
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

void register_backend(DeviceType type, BackendFactory factory) {
  registry().add(type, std::move(factory));
}

absl::Status device_usable(Device d) { return registry().usable(d); }

Backend& backend_for(Device d) { return registry().backend(d); }

std::string describe_plan_on(Device d, const LaunchPlan& plan) {
  if (!device_usable(d).ok()) return {};
  return backend_for(d).describe_plan(plan);
}

void synchronize_all_devices() {
  for (Backend* b : registry().made()) b->synchronize();
}

const SourceRenderer* source_renderer(DeviceType type) { return registry().renderer(type); }

const MachineCodeStore* machine_code_store(DeviceType type) {
  return registry().machine_code(type);
}

const SourceRenderer* dump_source_renderer() {
  for (size_t t = 0; t < kDeviceTypes; ++t) {
    if (const SourceRenderer* r = source_renderer(static_cast<DeviceType>(t))) return r;
  }
  return nullptr;
}

std::shared_ptr<const base::Buffer> host_view(const std::shared_ptr<const base::Buffer>& buffer) {
  if (buffer == nullptr || !buffer->on_device()) return buffer;
  return copier_for(buffer->device().type).copy_to_host(*buffer);
}

std::shared_ptr<base::Buffer> place_on(const std::shared_ptr<base::Buffer>& buffer, Device device) {
  if (buffer == nullptr) return buffer;
  const bool there =
      buffer->on_device() ? buffer->device() == device : device.type == DeviceType::CPU;
  if (there) return buffer;
  std::shared_ptr<base::Buffer> host =
      buffer->on_device() ? copier_for(buffer->device().type).copy_to_host(*buffer) : buffer;
  if (device.type == DeviceType::CPU) return host;
  return copier_for(device.type).upload(*host, device);
}

Tensor realized_on(const ops::ValueType& type, const std::shared_ptr<base::Buffer>& data,
                   Device device) {
  return make_realized(type, place_on(data, device), device);
}

Device device_from_setting(const std::string& setting) {
  // The registered types KILN_DEVICE can name, in enum order (CPU first).
  std::vector<std::pair<DeviceType, BackendFactory>> named;
  for (size_t t = 0; t < kDeviceTypes; ++t) {
    const DeviceType type = static_cast<DeviceType>(t);
    std::optional<BackendFactory> f = registry().factory(type);
    if (f && !f->setting.empty()) named.emplace_back(type, *std::move(f));
  }
  if (setting.empty() || setting == "auto") {
    for (const auto& [type, f] : named) {
      const Device first{type, 0};
      if (f.preferred_by_auto && device_usable(first).ok()) return first;
    }
    return Device{DeviceType::CPU, 0};
  }
  std::string choices;
  for (const auto& [type, f] : named) {
    absl::StrAppend(&choices, f.setting, ", ");
    if (type != DeviceType::CPU) absl::StrAppend(&choices, f.setting, ":N, ");
    const std::string prefix = f.setting + ":";
    const bool indexed = type != DeviceType::CPU && setting.rfind(prefix, 0) == 0;
    if (setting != f.setting && !indexed) continue;
    Device d{type, 0};
    if (indexed) {
      std::optional<int> index = parse_index(std::string_view(setting).substr(prefix.size()));
      if (!index) {
        throw Error(absl::StrCat("KILN_DEVICE='", setting, "': the ", f.name,
                                 " device index must be a non-negative integer, as in ", f.setting,
                                 ":0"));
      }
      d.index = *index;
    }
    absl::Status s = device_usable(d);
    if (s.ok()) return d;
    if (s.code() == absl::StatusCode::kOutOfRange) {
      throw Error(absl::StrCat("KILN_DEVICE=", setting, ": ", s.message()));
    }
    throw Error(absl::StrCat("KILN_DEVICE=", setting, " but no ", f.name, " device is usable (",
                             s.message(), "); set KILN_DEVICE=cpu or auto"));
  }
  throw Error(absl::StrCat("KILN_DEVICE='", setting, "' is not one of ", choices, "auto"));
}

}  // namespace kiln::jit
