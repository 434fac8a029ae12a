// The CUDA driver API on the host, for tests of the CUDA backend where no GPU is: the entry
// points of runtime/cuda/driver.h, keeping the driver's rules wherever Kiln could break them.
// runtime::cuda::set_driver_api_for_testing(&EmulatedDriver::get().api()) puts it in place.
//
// - Contexts. Each GPU has a primary context, and each thread its own stack of current
//   contexts (cuCtxSetCurrent replaces the top; push and pop). Allocating, freeing, copying,
//   loading and launching with no current context fail with CUDA_ERROR_INVALID_CONTEXT, as
//   on a GPU; work on a stream also needs the stream's own context current.
// - Memory. Host memory reserved without being touched (a test can allocate more than the
//   machine has), at the addresses it has on the host. Copies check that the device side
//   lies inside a live allocation of the stream's GPU.
// - Modules. cuModuleLoadData reads the cubin NVRTC made, as the driver does: its entry
//   points are its .text.<name> sections, a kernel's static shared memory is the size of
//   its .nv.shared.<name> section (on sm_90 that includes 1 KiB the compiler reserves), and
//   its arguments' sizes are in its .nv.info.<name> section.
// - Launches. Checked like the driver's: at most 1024 threads a block, the grid's limits,
//   and dynamic shared memory within the kernel's limit, which is 48 KiB less its static
//   size until cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) raises it
//   (at most to the GPU's opt-in maximum less the static size). Kernels do not run here
//   (cuda_emulation.h runs them, without a driver); each launch is recorded with its
//   arguments' bytes, copied when it is issued, as the driver copies them.
// - Faults. A launch of a GPU's `faulting_kernel` succeeds, and faults the GPU when it runs:
//   as on the driver, the error (CUDA_ERROR_ILLEGAL_ADDRESS) comes from later calls, the next
//   synchronize of the GPU's stream and every call that needs its context.
// - Streams. Work runs when issued. During a capture, copies and launches go into the graph
//   instead, and run at cuGraphLaunch; synchronizing a capturing stream fails, and a
//   cuMemFree on the GPU (from any thread) invalidates the capture: cuStreamEndCapture then
//   returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
//   cuStreamGetCaptureInfo_v2 gives the last node captured, and
//   cuGraphExecKernelNodeSetParams_v2 changes a kernel node of an executable graph, named by
//   its node in the graph it was instantiated from (which must still exist).
//
// Every failed call is recorded, so a test sees failures the backend would not report.
#ifndef KILN_TESTS_CUDA_EMULATION_EMULATED_DRIVER_H_
#define KILN_TESTS_CUDA_EMULATION_EMULATED_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cuda/driver.h"

namespace kiln::testing {

// One emulated GPU, as the driver describes it. The defaults are an H100's.
struct EmulatedGpu {
  std::string name = "Kiln emulated H100";
  int compute_major = 9, compute_minor = 0;
  int sm_count = 132;
  int max_shared_per_block_optin = 227 * 1024;
  int64_t memory_bytes = int64_t{80} << 30;
  int failing_attribute = -1;   // cuDeviceGetAttribute of this attribute fails
  std::string faulting_kernel;  // the entry point whose launches fault the GPU when they run
};

// A launch that ran (outside a capture, or in a graph's launch).
struct EmulatedLaunch {
  int gpu = 0;
  std::string function;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;  // dynamic
  // Each argument's bytes, as given to cuLaunchKernel or to the kernel node.
  std::vector<std::vector<std::byte>> arguments;
};

class EmulatedDriver {
 public:
  static constexpr int kGpus = 8;

  // The process's emulated driver: made on first use and never destroyed, since the CUDA
  // devices the backend makes with it keep it for the process.
  static EmulatedDriver& get();

  const runtime::cuda::DriverApi& api() const { return api_; }

  // GPU `index`'s description. The backend reads it once, when it first uses the GPU.
  EmulatedGpu& gpu(int index);

  // Called on entry to every entry point with the driver's name for it ("cuCtxSetCurrent"),
  // before the call does anything and holding no lock: a test can make threads meet at a
  // chosen call. Empty: none.
  void set_before_call(std::function<void(std::string_view call)> hook);

  // Every GPU back to the defaults, no hook, and the records below cleared. Contexts,
  // memory and modules stay: the backend's devices still hold them.
  void reset();

  // Each failed call, as "cuMemFree_v2: CUDA_ERROR_INVALID_CONTEXT".
  std::vector<std::string> failures() const;
  std::vector<EmulatedLaunch> launches() const;
  // How many times the entry point named `call` was called.
  int64_t calls(std::string_view call) const;
  // Allocations made and not freed, on every GPU.
  int64_t live_allocations() const;

 private:
  EmulatedDriver();

  runtime::cuda::DriverApi api_;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_CUDA_EMULATION_EMULATED_DRIVER_H_
