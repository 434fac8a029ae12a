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
using CUgraphNode = struct CUgraphNode_st*;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;      // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr int kAttributeMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_...
inline constexpr int kAttributeComputeMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int kAttributeComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: what a block may have, static and
// dynamic shared memory together, once its kernel opts in (227 KiB on Hopper).
inline constexpr int kAttributeMaxSharedPerBlockOptin = 97;
// What a block may have without opting in, on every GPU.
inline constexpr int kDefaultSharedPerBlock = 48 * 1024;
inline constexpr int kFunctionAttributeSharedSizeBytes = 1;  // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: the dynamic shared memory a launch may ask
// for; kDefaultSharedPerBlock less the static size until the kernel opts in to more.
inline constexpr int kFunctionAttributeMaxDynamicSharedSizeBytes = 8;
inline constexpr unsigned int kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
inline constexpr int kStreamCaptureModeRelaxed = 2;    // CU_STREAM_CAPTURE_MODE_RELAXED
inline constexpr int kStreamCaptureStatusActive = 1;   // CU_STREAM_CAPTURE_STATUS_ACTIVE

// CUDA_KERNEL_NODE_PARAMS_v2: a kernel node's launch, as cuGraphExecKernelNodeSetParams_v2
// takes it. The driver copies the arguments `kernel_params` points to during the call.
struct KernelNodeParams {
  CUfunction function = nullptr;
  unsigned int grid[3] = {1, 1, 1};
  unsigned int block[3] = {1, 1, 1};
  unsigned int shared_bytes = 0;  // dynamic
  void** kernel_params = nullptr;
  void** extra = nullptr;
  void* kernel = nullptr;  // a CUkernel, read only when `function` is null
  CUcontext context = nullptr;
};
static_assert(sizeof(KernelNodeParams) == 72, "cuda.h's CUDA_KERNEL_NODE_PARAMS_v2");

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
  CUresult (*ctx_push_current)(CUcontext) = nullptr;
  CUresult (*ctx_pop_current)(CUcontext*) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned int) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  // cuStreamQuery: CUDA_SUCCESS once the stream's work is done, else CUDA_ERROR_NOT_READY.
  CUresult (*stream_query)(CUstream) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*function_attribute)(int*, int, CUfunction) = nullptr;
  CUresult (*function_set_attribute)(CUfunction, int, int) = nullptr;
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
  // cuStreamGetCaptureInfo_v2: during a capture, `dependencies` are the nodes the stream's
  // next work will follow, which right after a launch on Kiln's one stream is that launch.
  CUresult (*stream_get_capture_info)(CUstream, int* status, unsigned long long* id, CUgraph*,
                                      const CUgraphNode** dependencies,
                                      size_t* dependency_count) = nullptr;
  CUresult (*graph_exec_kernel_node_set_params)(CUgraphExec, CUgraphNode,
                                                const KernelNodeParams*) = nullptr;
};

// The process's driver (libcuda.so.1), loaded once; or the one set_driver_api_for_testing
// put in its place.
const DriverApi& driver_api();

// Test hook: driver_api() returns `api` from now on (the host emulation of the driver in
// tests/cuda_emulation/emulated_driver.h), or the process's driver again for nullptr. A CUDA
// device keeps the driver it was made with, and is never found through another.
void set_driver_api_for_testing(const DriverApi* api);

// Loads the driver entry points from `library` (a test loads the CUDA Toolkit's stub
// libcuda, which exports every symbol, to check each name Kiln asks for exists).
DriverApi load_driver_api(const char* library);

// OK, or an error naming `call` and the driver's text for `result`.
absl::Status check_cuda(CUresult result, const char* call);

// The value of `attribute` (a kAttribute constant) of `device`, or an error naming the call
// and the attribute: a GPU whose attributes cannot be read is not used with guessed ones.
absl::StatusOr<int> device_attribute(const DriverApi& d, CUdevice device, int attribute);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_DRIVER_H_
