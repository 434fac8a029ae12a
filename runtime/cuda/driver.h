// The CUDA driver (libcuda.so.1), opened with dlopen on first use: a Kiln binary starts and
// runs on the CPU where there is no driver or no GPU.
#ifndef KILN_RUNTIME_CUDA_DRIVER_H_
#define KILN_RUNTIME_CUDA_DRIVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::runtime::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int64_t memory_bytes = 0;
};

// The GPUs the driver sees, or why there are none (no driver, cuInit failed, ...).
absl::StatusOr<std::vector<DeviceInfo>> query_devices();

// The driver entry points Kiln calls (query_devices and the CUDA backend), with cuda.h's C
// signatures and types declared here (building Kiln needs no CUDA headers). Loaded together
// on first use.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;      // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr int kAttributeMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_...
inline constexpr int kAttributeComputeMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int kAttributeComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
inline constexpr unsigned int kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
inline constexpr int kStreamCaptureModeRelaxed = 2;    // CU_STREAM_CAPTURE_MODE_RELAXED

struct DriverApi {
  absl::Status status;  // why the driver is not usable, when it is not
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_memory)(size_t*, CUdevice) = nullptr;
  CUresult (*device_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned int) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                            unsigned int, unsigned int, unsigned int, CUstream, void**,
                            void**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*stream_begin_capture)(CUstream, int) = nullptr;
  CUresult (*stream_end_capture)(CUstream, CUgraph*) = nullptr;
  CUresult (*graph_instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*graph_launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*graph_destroy)(CUgraph) = nullptr;
  CUresult (*graph_exec_destroy)(CUgraphExec) = nullptr;
};

// The process's driver (libcuda.so.1), loaded once.
const DriverApi& driver_api();

// Loads the driver entry points from `library` (a test loads the CUDA Toolkit's stub
// libcuda, which exports every symbol, to check each name Kiln asks for exists).
DriverApi load_driver_api(const char* library);

// OK, or an error naming `call` and the driver's text for `result`.
absl::Status check_cuda(CUresult result, const char* call);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_DRIVER_H_
