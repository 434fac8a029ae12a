#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::runtime::cuda {

absl::StatusOr<std::vector<DeviceInfo>> query_devices() {
  const DriverApi& d = driver_api();
  if (!d.status.ok()) return d.status;
  if (absl::Status s = check_cuda(d.init(0), "cuInit"); !s.ok()) return s;
  int count = 0;
  if (absl::Status s = check_cuda(d.device_count(&count), "cuDeviceGetCount"); !s.ok()) return s;
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    if (absl::Status s = check_cuda(d.device_get(&device, i), "cuDeviceGet"); !s.ok()) return s;
    DeviceInfo info;
    info.index = i;
    char name[256] = {};
    d.device_name(name, sizeof name, device);
    info.name = name;
    d.device_attribute(&info.compute_major, kAttributeComputeMajor, device);
    d.device_attribute(&info.compute_minor, kAttributeComputeMinor, device);
    size_t bytes = 0;
    d.device_memory(&bytes, device);
    info.memory_bytes = static_cast<int64_t>(bytes);
    devices.push_back(info);
  }
  return devices;
}

const DriverApi& driver_api() {
  static const DriverApi api = load_driver_api("libcuda.so.1");
  return api;
}

DriverApi load_driver_api(const char* library) {
  DriverApi a;
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    a.status = absl::UnavailableError(absl::StrCat("no CUDA driver (", library, " not found)"));
    return a;
  }
  auto load = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr && a.status.ok()) {
      a.status = absl::UnavailableError(absl::StrCat(library, " lacks ", name));
    }
  };
  load(a.init, "cuInit");
  load(a.device_count, "cuDeviceGetCount");
  load(a.device_get, "cuDeviceGet");
  load(a.device_name, "cuDeviceGetName");
  load(a.device_memory, "cuDeviceTotalMem_v2");
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
  load(a.stream_begin_capture, "cuStreamBeginCapture_v2");
  load(a.stream_end_capture, "cuStreamEndCapture");
  load(a.graph_instantiate, "cuGraphInstantiateWithFlags");
  load(a.graph_launch, "cuGraphLaunch");
  load(a.graph_destroy, "cuGraphDestroy");
  load(a.graph_exec_destroy, "cuGraphExecDestroy");
  return a;
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
