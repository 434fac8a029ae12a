#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <atomic>
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
    if (absl::Status s = check_cuda(d.device_name(name, sizeof name, device), "cuDeviceGetName");
        !s.ok()) {
      return s;
    }
    info.name = name;
    absl::StatusOr<int> major = device_attribute(d, device, kAttributeComputeMajor);
    if (!major.ok()) return major.status();
    absl::StatusOr<int> minor = device_attribute(d, device, kAttributeComputeMinor);
    if (!minor.ok()) return minor.status();
    info.compute_major = *major;
    info.compute_minor = *minor;
    size_t bytes = 0;
    if (absl::Status s = check_cuda(d.device_memory(&bytes, device), "cuDeviceTotalMem"); !s.ok()) {
      return s;
    }
    info.memory_bytes = static_cast<int64_t>(bytes);
    devices.push_back(info);
  }
  return devices;
}

namespace {
std::atomic<const DriverApi*> driver_for_testing{nullptr};

// The CU_DEVICE_ATTRIBUTE_ name of the attributes Kiln reads, for error messages.
const char* attribute_name(int attribute) {
  switch (attribute) {
    case kAttributeMultiprocessorCount:
      return "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT";
    case kAttributeComputeMajor:
      return "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR";
    case kAttributeComputeMinor:
      return "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR";
    case kAttributeMaxSharedPerBlockOptin:
      return "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN";
  }
  return "an unnamed attribute";
}
}  // namespace

const DriverApi& driver_api() {
  if (const DriverApi* api = driver_for_testing.load(std::memory_order_acquire)) return *api;
  static const DriverApi api = load_driver_api("libcuda.so.1");
  return api;
}

void set_driver_api_for_testing(const DriverApi* api) {
  driver_for_testing.store(api, std::memory_order_release);
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
  load(a.ctx_push_current, "cuCtxPushCurrent_v2");
  load(a.ctx_pop_current, "cuCtxPopCurrent_v2");
  load(a.stream_create, "cuStreamCreate");
  load(a.stream_synchronize, "cuStreamSynchronize");
  load(a.stream_query, "cuStreamQuery");
  load(a.mem_alloc, "cuMemAlloc_v2");
  load(a.mem_free, "cuMemFree_v2");
  load(a.memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
  load(a.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
  load(a.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
  load(a.module_load_data, "cuModuleLoadData");
  load(a.module_get_function, "cuModuleGetFunction");
  load(a.function_attribute, "cuFuncGetAttribute");
  load(a.function_set_attribute, "cuFuncSetAttribute");
  load(a.launch_kernel, "cuLaunchKernel");
  load(a.error_string, "cuGetErrorString");
  load(a.stream_begin_capture, "cuStreamBeginCapture_v2");
  load(a.stream_end_capture, "cuStreamEndCapture");
  load(a.graph_instantiate, "cuGraphInstantiateWithFlags");
  load(a.graph_launch, "cuGraphLaunch");
  load(a.graph_destroy, "cuGraphDestroy");
  load(a.graph_exec_destroy, "cuGraphExecDestroy");
  load(a.stream_get_capture_info, "cuStreamGetCaptureInfo_v2");
  load(a.graph_exec_kernel_node_set_params, "cuGraphExecKernelNodeSetParams_v2");
  return a;
}

absl::Status check_cuda(CUresult result, const char* call) {
  if (result == 0) return absl::OkStatus();
  // cuGetErrorString fails, and leaves the text null, for a code it does not know.
  const char* text = nullptr;
  if (driver_api().error_string == nullptr || driver_api().error_string(result, &text) != 0 ||
      text == nullptr) {
    text = "unknown error";
  }
  const std::string message = absl::StrCat(call, " failed: ", text, " (CUresult ", result, ")");
  return result == kCudaErrorOutOfMemory ? absl::ResourceExhaustedError(message)
                                         : absl::InternalError(message);
}

absl::StatusOr<int> device_attribute(const DriverApi& d, CUdevice device, int attribute) {
  int value = 0;
  const absl::Status s =
      check_cuda(d.device_attribute(&value, attribute, device), "cuDeviceGetAttribute");
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("reading ", attribute_name(attribute), ": ", s.message()));
  }
  return value;
}

}  // namespace kiln::runtime::cuda
