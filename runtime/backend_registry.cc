// The backend registry: a factory per device type, a backend per device, made on first use.
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "runtime/backend.h"

namespace kiln::runtime {
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

}  // namespace

void register_backend(DeviceType type, BackendFactory factory) {
  registry().add(type, std::move(factory));
}

absl::Status device_usable(Device d) { return registry().usable(d); }

Backend& backend_for(Device d) { return registry().backend(d); }

std::string describe_plan_on(Device d, const jit::LaunchPlan& plan) {
  if (!device_usable(d).ok()) return {};
  return backend_for(d).describe_plan(plan);
}

void synchronize_all_devices() {
  for (Backend* b : registry().made()) b->synchronize();
}

const SourceRenderer* source_renderer(DeviceType type) { return registry().renderer(type); }

const SourceRenderer* dump_source_renderer() {
  for (size_t t = 0; t < kDeviceTypes; ++t) {
    if (const SourceRenderer* r = source_renderer(static_cast<DeviceType>(t))) return r;
  }
  return nullptr;
}

}  // namespace kiln::runtime
