#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::runtime::cuda {
namespace {

// Driver entry points with the C signatures of cuda.h (no CUDA headers needed to build).
using CUresult = int;
constexpr int kComputeMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

struct Driver {
  absl::Status status;
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(int*, int) = nullptr;
  CUresult (*device_name)(char*, int, int) = nullptr;
  CUresult (*device_attribute)(int*, int, int) = nullptr;
  CUresult (*device_memory)(size_t*, int) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      d.status = absl::UnavailableError("no CUDA driver (libcuda.so.1 not found)");
      return d;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (p == nullptr && d.status.ok()) {
        d.status = absl::UnavailableError(absl::StrCat("libcuda.so.1 lacks ", name));
      }
      return p;
    };
    d.init = reinterpret_cast<decltype(d.init)>(sym("cuInit"));
    d.device_count = reinterpret_cast<decltype(d.device_count)>(sym("cuDeviceGetCount"));
    d.device_get = reinterpret_cast<decltype(d.device_get)>(sym("cuDeviceGet"));
    d.device_name = reinterpret_cast<decltype(d.device_name)>(sym("cuDeviceGetName"));
    d.device_attribute =
        reinterpret_cast<decltype(d.device_attribute)>(sym("cuDeviceGetAttribute"));
    d.device_memory = reinterpret_cast<decltype(d.device_memory)>(sym("cuDeviceTotalMem_v2"));
    d.error_string = reinterpret_cast<decltype(d.error_string)>(sym("cuGetErrorString"));
    return d;
  }();
  return d;
}

absl::Status check(const Driver& d, CUresult r, const char* call) {
  if (r == 0) return absl::OkStatus();
  const char* text = "unknown error";
  d.error_string(r, &text);
  return absl::UnavailableError(absl::StrCat(call, " failed: ", text, " (CUresult ", r, ")"));
}

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> query_devices() {
  const Driver& d = driver();
  if (!d.status.ok()) return d.status;
  if (absl::Status s = check(d, d.init(0), "cuInit"); !s.ok()) return s;
  int count = 0;
  if (absl::Status s = check(d, d.device_count(&count), "cuDeviceGetCount"); !s.ok()) return s;
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    int device = 0;
    if (absl::Status s = check(d, d.device_get(&device, i), "cuDeviceGet"); !s.ok()) return s;
    DeviceInfo info;
    info.index = i;
    char name[256] = {};
    d.device_name(name, sizeof name, device);
    info.name = name;
    d.device_attribute(&info.compute_major, kComputeMajor, device);
    d.device_attribute(&info.compute_minor, kComputeMinor, device);
    size_t bytes = 0;
    d.device_memory(&bytes, device);
    info.memory_bytes = static_cast<int64_t>(bytes);
    devices.push_back(info);
  }
  return devices;
}

const DriverApi& driver_api() {
  static const DriverApi api = [] {
    DriverApi a;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      a.status = absl::UnavailableError("no CUDA driver (libcuda.so.1 not found)");
      return a;
    }
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && a.status.ok()) {
        a.status = absl::UnavailableError(absl::StrCat("libcuda.so.1 lacks ", name));
      }
    };
    load(a.init, "cuInit");
    load(a.device_get, "cuDeviceGet");
    load(a.device_attribute, "cuDeviceGetAttribute");
    load(a.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    load(a.ctx_set_current, "cuCtxSetCurrent");
    load(a.stream_create, "cuStreamCreate");
    load(a.stream_synchronize, "cuStreamSynchronize");
    load(a.mem_alloc, "cuMemAlloc_v2");
    load(a.mem_free, "cuMemFree_v2");
    load(a.memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
    load(a.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
    load(a.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
    load(a.module_load_data, "cuModuleLoadData");
    load(a.module_get_function, "cuModuleGetFunction");
    load(a.launch_kernel, "cuLaunchKernel");
    load(a.error_string, "cuGetErrorString");
    return a;
  }();
  return api;
}

absl::Status check_cuda(CUresult result, const char* call) {
  if (result == 0) return absl::OkStatus();
  const char* text = "unknown error";
  if (driver_api().error_string != nullptr) driver_api().error_string(result, &text);
  const std::string message = absl::StrCat(call, " failed: ", text, " (CUresult ", result, ")");
  return result == kCudaErrorOutOfMemory ? absl::ResourceExhaustedError(message)
                                         : absl::InternalError(message);
}

}  // namespace kiln::runtime::cuda
