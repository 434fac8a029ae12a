// One GPU as the CUDA backend uses it: its primary context, the one stream all of Kiln's work
// goes to (and the mutex held while work is issued to it), the caching allocator, the loaded
// modules, cuBLASLt and the collectives. Devices are made on first use and kept for the
// process.
#ifndef KILN_RUNTIME_CUDA_CUDA_DEVICE_H_
#define KILN_RUNTIME_CUDA_CUDA_DEVICE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "base/buffer.h"
#include "jit/backend/backend.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/cuda/device_collectives.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/parallel_compile.h"

namespace kiln::runtime::cuda {

// Throws kiln::Error "<context>: <call> failed: ..." unless `result` is success.
void throw_if_failed(CUresult result, const char* call, const std::string& context);

// For calls that release something, in cleanup paths and destructors: a failure loses the
// resource but not a result, so it is reported on stderr rather than thrown.
void report_if_failed(CUresult result, const char* call, const std::string& context);

// One GPU: its context, the stream all of Kiln's work goes to, the allocator and modules.
class CudaDevice {
 public:
  // A loaded entry point, and the dynamic shared memory its launches may ask for.
  struct Function {
    CUfunction handle = nullptr;
    int dynamic_shared_limit = 0;
  };

  // `api`: the driver it is made with, kept for everything it does afterwards.
  // KILN_CUDA_SYNC is read here, once per device.
  CudaDevice(int index, const DriverApi& api);

  // Device `index` of the process's driver (driver_api()), made on first use.
  static CudaDevice& get(int index);

  void make_current() const;

  std::shared_ptr<base::Buffer> allocate(int64_t nbytes);

  void synchronize() const;

  // The entry point of every kernel of `plan`, in order. Kernels not loaded yet are
  // rendered, then compiled together on all cores (memory and disk caches first), then
  // loaded; on a plan hit this is one lookup per kernel, with nothing rendered or compiled.
  // A kernel marked in `skip` (cuBLASLt runs it) is neither compiled nor looked up: its
  // Function stays null.
  std::vector<Function> prepare(const jit::LaunchPlan& plan, const std::vector<bool>& skip = {});

  // The entry point of kernel `k` alone, for a matmul planned on cuBLASLt that falls back.
  Function prepare_kernel(const jit::LaunchPlan& plan, size_t k);

  // cuBLASLt on this GPU (cublaslt_matmul.h): it loads the library on first need.
  CublasLtMatmuls& cublaslt() { return *cublaslt_; }
  // Collectives on this GPU's stream (device_collectives.h); the stream mutex guards them.
  DeviceCollectives& collectives() { return *collectives_; }

  // `args`: a pointer to each kernel argument's bytes.
  void launch(CUfunction f, const int64_t grid[3], const int block[3], int shared_bytes,
              void** args, const std::string& what);

  // Under KILN_CUDA_SYNC=1, waits for the work just issued (`what`: "kernel <name>", "copy
  // of ...") and raises its failure naming it: otherwise a kernel's fault surfaces at some
  // later call, named after that call. Nothing inside a capture, which cannot synchronize:
  // a graph's launch is checked as a whole (and a plan's first run is never captured).
  void checked(const std::string& what) const;
  bool syncs_each_call() const { return sync_each_call_; }

  // The allocator frees nothing from the capture's start to its end, on any thread: a
  // cuMemFree synchronizes the device and would invalidate the capture.
  void begin_capture();
  CUresult end_capture(CUgraph* graph);

  // During a capture, the node of the launch just issued: on Kiln's one stream, the one node
  // the stream's next work would follow.
  CUgraphNode captured_node() const;

  CUstream stream() const { return stream_; }
  const DriverApi& api() const { return api_; }
  // Held while issuing work to the stream, so a graph capture never records another
  // thread's work (and a copy never synchronizes a stream being captured). A thread never
  // holds two devices' at once (CudaBackend::place_inputs).
  std::recursive_mutex& stream_mutex() { return stream_mutex_; }
  int sm_count() const { return sm_count_; }
  const std::string& name() const { return name_; }

 private:
  // A loaded module: a program at one index width.
  using ModuleKey = std::pair<const jit::KernelProgram*, bool>;
  struct Loaded {
    std::shared_ptr<const jit::KernelProgram> program;  // keeps the key alive
    Function function;
  };

  // Whether kernel `k` needs the 64-bit entry point: some space or buffer it touches has
  // 2^31 - 2^26 elements or more (kernel_args.h). A user's kernel has its own single entry.
  static bool needs_wide_index(const jit::LaunchPlan& plan, size_t k);

  // The module of a generated kernel with the one entry point a launch needs (the name is
  // the entry's), or a user's kernel after the argument struct it takes.
  static KernelSource module_source(const jit::KernelProgram& program, bool wide);

  [[noreturn]] static void throw_compile_error(const KernelSource& k, const absl::Status& s);

  int attribute(CUdevice dev, int attribute) const;

  // Runs `call` (a driver call returning CUresult) with this device's context pushed on the
  // calling thread, whose own current context is restored afterwards.
  template <class Call>
  absl::Status in_context(Call call, const char* name) const;

  // Loads a cubin and finds its entry point `entry`, opted in to the device's shared memory.
  Function load(const std::string& cubin, const std::string& entry) const;

  int index_;
  std::string name_;
  const DriverApi& api_;
  const bool sync_each_call_;  // KILN_CUDA_SYNC=1
  bool capturing_ = false;     // a graph capture is under way (guarded by the stream mutex)
  int arch_ = 0;
  int sm_count_ = 0;
  int max_shared_per_block_ = 0;  // static and dynamic, once a kernel opts in
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::unique_ptr<DeviceAllocator> allocator_;
  std::unique_ptr<CublasLtMatmuls> cublaslt_;
  std::unique_ptr<DeviceCollectives> collectives_;
  std::mutex modules_mutex_;
  std::recursive_mutex stream_mutex_;
  absl::flat_hash_map<ModuleKey, Loaded> loaded_;  // kept for the process
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUDA_DEVICE_H_
