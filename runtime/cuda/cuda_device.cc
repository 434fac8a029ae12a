// CudaDevice (cuda_device.h): setting up a GPU's context, stream, allocator, cuBLASLt and
// collectives; compiling and loading a plan's modules; launches, KILN_CUDA_SYNC checks and
// the stream capture calls the graph replay builds on.
#include "runtime/cuda/cuda_device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/cache_dir.h"
#include "base/stats_counters.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/cubin_cache.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/kernel_args.h"

namespace kiln::runtime::cuda {
namespace {

// KILN_CUDA_SYNC=1: every launch and copy is followed by a synchronize (docs/environment.md).
bool sync_requested() {
  const char* v = std::getenv("KILN_CUDA_SYNC");
  return v != nullptr && std::string(v) == "1";
}

std::mutex& registry_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::deque<CudaDevice>& devices() {
  static std::deque<CudaDevice>* d = new std::deque<CudaDevice>();  // never destroyed
  return *d;
}

CubinCache& cubin_cache() {
  static CubinCache* cache = new CubinCache(base::default_cache_dir(), int64_t{1} << 30);
  return *cache;
}

}  // namespace

void throw_if_failed(CUresult result, const char* call, const std::string& context) {
  absl::Status s = check_cuda(result, call);
  if (!s.ok()) throw Error(absl::StrCat(context, ": ", s.message()));
}

void report_if_failed(CUresult result, const char* call, const std::string& context) {
  absl::Status s = check_cuda(result, call);
  if (!s.ok()) {
    std::fprintf(stderr, "[kiln] %s: %s\n", context.c_str(), std::string(s.message()).c_str());
  }
}

// Defined before the constructor, its one user, so that no other file needs it.
template <class Call>
absl::Status CudaDevice::in_context(Call call, const char* name) const {
  if (absl::Status s = check_cuda(api_.ctx_push_current(context_), "cuCtxPushCurrent"); !s.ok()) {
    return s;
  }
  absl::Status s = check_cuda(call(), name);
  CUcontext popped = nullptr;
  s.Update(check_cuda(api_.ctx_pop_current(&popped), "cuCtxPopCurrent"));
  return s;
}

CudaDevice::CudaDevice(int index, const DriverApi& api)
    : index_(index),
      name_(absl::StrCat("cuda:", index)),
      api_(api),
      sync_each_call_(sync_requested()) {
  const DriverApi& d = api_;
  if (!d.status.ok()) throw Error(absl::StrCat(name_, ": ", d.status.message()));
  throw_if_failed(d.init(0), "cuInit", name_);
  CUdevice dev = 0;
  throw_if_failed(d.device_get(&dev, index), "cuDeviceGet", name_);
  arch_ = attribute(dev, kAttributeComputeMajor) * 10 + attribute(dev, kAttributeComputeMinor);
  sm_count_ = attribute(dev, kAttributeMultiprocessorCount);
  max_shared_per_block_ = attribute(dev, kAttributeMaxSharedPerBlockOptin);
  throw_if_failed(d.primary_ctx_retain(&context_, dev), "cuDevicePrimaryCtxRetain", name_);
  make_current();
  throw_if_failed(d.stream_create(&stream_, kStreamNonBlocking), "cuStreamCreate", name_);
  // The allocator calls these from any thread: a free from whichever thread drops a
  // buffer's last reference, which may have no current context or another GPU's.
  allocator_ = std::make_unique<DeviceAllocator>(
      name_,
      [this](size_t bytes) -> absl::StatusOr<uint64_t> {
        CUdeviceptr p = 0;
        if (absl::Status s = in_context([&] { return api_.mem_alloc(&p, bytes); }, "cuMemAlloc");
            !s.ok()) {
          return s;
        }
        return static_cast<uint64_t>(p);
      },
      [this](uint64_t p) {
        const absl::Status s =
            in_context([&] { return api_.mem_free(static_cast<CUdeviceptr>(p)); }, "cuMemFree");
        if (!s.ok()) {
          std::fprintf(stderr, "[kiln] %s: device memory not freed (lost until exit): %s\n",
                       name_.c_str(), std::string(s.message()).c_str());
        }
      },
      size_t{4} << 30);
  cublaslt_ = std::make_unique<CublasLtMatmuls>(name_, [this](int64_t bytes) {
    std::shared_ptr<base::Buffer> workspace = allocate(bytes);
    base::counters().bytes_allocated -= bytes;  // cuBLASLt's scratch, not a result
    return workspace;
  });
  collectives_ = std::make_unique<DeviceCollectives>(api_, stream_, name_);
}

CudaDevice& CudaDevice::get(int index) {
  const DriverApi& api = driver_api();
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (CudaDevice& d : devices()) {
    if (d.index_ == index && &d.api_ == &api) return d;
  }
  return devices().emplace_back(index, api);
}

void CudaDevice::make_current() const {
  throw_if_failed(api_.ctx_set_current(context_), "cuCtxSetCurrent", name_);
}

std::shared_ptr<base::Buffer> CudaDevice::allocate(int64_t nbytes) {
  DeviceAllocator::Block block = allocator_->allocate(static_cast<size_t>(nbytes));
  DeviceAllocator* allocator = allocator_.get();
  return std::make_shared<base::Buffer>(nbytes, Device{DeviceType::CUDA, index_}, block.address,
                                        [allocator, block] { allocator->release(block); });
}

void CudaDevice::synchronize() const {
  throw_if_failed(api_.stream_synchronize(stream_), "cuStreamSynchronize", name_);
}

std::vector<CudaDevice::Function> CudaDevice::prepare(const jit::LaunchPlan& plan,
                                                      const std::vector<bool>& skip) {
  std::lock_guard<std::mutex> lock(modules_mutex_);
  std::vector<ModuleKey> keys;
  std::vector<std::shared_ptr<const jit::KernelProgram>> missing_programs;
  std::vector<ModuleKey> missing;
  std::vector<KernelSource> sources;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const std::shared_ptr<const jit::KernelProgram>& program = plan.kernels[k].program;
    // Skipped kernels, and collectives (no module: NCCL or MPI moves their bytes).
    const bool none =
        (k < skip.size() && skip[k]) || program->anchor == jit::AnchorKind::kCollective;
    const ModuleKey key{none ? nullptr : program.get(), !none && needs_wide_index(plan, k)};
    keys.push_back(key);
    if (key.first == nullptr || loaded_.contains(key) ||
        std::find(missing.begin(), missing.end(), key) != missing.end()) {
      continue;
    }
    missing.push_back(key);
    missing_programs.push_back(program);
    sources.push_back(module_source(*program, key.second));
  }
  if (!missing.empty()) {
    std::vector<absl::StatusOr<CubinCache::Result>> cubins =
        compile_in_parallel(cubin_cache(), sources, arch_);
    for (size_t i = 0; i < missing.size(); ++i) {
      if (!cubins[i].ok()) throw_compile_error(sources[i], cubins[i].status());
      if (cubins[i]->source == CubinCache::Source::kDisk) base::counters().disk_cache_hits += 1;
      loaded_.emplace(missing[i],
                      Loaded{missing_programs[i], load(cubins[i]->cubin, sources[i].name)});
    }
  }
  std::vector<Function> functions;
  functions.reserve(keys.size());
  for (const ModuleKey& key : keys) {
    functions.push_back(key.first == nullptr ? Function{} : loaded_.at(key).function);
  }
  return functions;
}

CudaDevice::Function CudaDevice::prepare_kernel(const jit::LaunchPlan& plan, size_t k) {
  std::vector<bool> skip(plan.kernels.size(), true);
  skip[k] = false;
  return prepare(plan, skip)[k];
}

void CudaDevice::launch(CUfunction f, const int64_t grid[3], const int block[3], int shared_bytes,
                        void** args, const std::string& what) {
  throw_if_failed(
      api_.launch_kernel(f, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                         static_cast<unsigned>(grid[2]), static_cast<unsigned>(block[0]),
                         static_cast<unsigned>(block[1]), static_cast<unsigned>(block[2]),
                         static_cast<unsigned>(shared_bytes), stream_, args, nullptr),
      "cuLaunchKernel", absl::StrCat(name_, " kernel ", what));
  base::counters().kernels_launched += 1;
  if (sync_each_call_) checked(absl::StrCat("kernel ", what));
}

void CudaDevice::checked(const std::string& what) const {
  if (!sync_each_call_ || capturing_) return;
  throw_if_failed(api_.stream_synchronize(stream_), "cuStreamSynchronize",
                  absl::StrCat(name_, " ", what, " (KILN_CUDA_SYNC=1: synchronized after it)"));
}

void CudaDevice::begin_capture() {
  allocator_->begin_capture();
  if (const CUresult r = api_.stream_begin_capture(stream_, kStreamCaptureModeRelaxed); r != 0) {
    allocator_->end_capture();
    throw_if_failed(r, "cuStreamBeginCapture", name_);
  }
  capturing_ = true;
}

CUresult CudaDevice::end_capture(CUgraph* graph) {
  capturing_ = false;
  const CUresult r = api_.stream_end_capture(stream_, graph);
  allocator_->end_capture();
  return r;
}

CUgraphNode CudaDevice::captured_node() const {
  int status = 0;
  unsigned long long id = 0;
  CUgraph graph = nullptr;
  const CUgraphNode* nodes = nullptr;
  size_t count = 0;
  throw_if_failed(api_.stream_get_capture_info(stream_, &status, &id, &graph, &nodes, &count),
                  "cuStreamGetCaptureInfo_v2", name_);
  if (status != kStreamCaptureStatusActive || count != 1 || nodes == nullptr) {
    throw Error(absl::StrCat(name_, ": a captured launch is not the capture's one last node (",
                             count, " nodes, capture status ", status, ")"));
  }
  return nodes[0];
}

bool CudaDevice::needs_wide_index(const jit::LaunchPlan& plan, size_t k) {
  const jit::PlannedKernel& pk = plan.kernels[k];
  if (pk.program->anchor == jit::AnchorKind::kCustomKernel) return false;
  // Elements from bytes; a block-quantized input has block_values per block_bytes.
  auto elements = [&](int node, DType dt) {
    return plan.node_bytes[node] / block_bytes(dt) * block_values(dt);
  };
  std::vector<int64_t> numels;
  for (size_t i = 0; i < pk.launch.inputs.size(); ++i) {
    numels.push_back(elements(pk.launch.inputs[i], pk.program->input_dtypes[i]));
  }
  for (size_t o = 0; o < pk.launch.outputs.size(); ++o) {
    numels.push_back(elements(pk.launch.outputs[o], pk.program->output_dtypes[o]));
  }
  return !fits_32bit_index(pk.launch, numels);
}

KernelSource CudaDevice::module_source(const jit::KernelProgram& program, bool wide) {
  if (program.anchor != jit::AnchorKind::kCustomKernel) {
    return {entry_name(program, wide),
            render_cuda(program, wide ? IndexWidths::k64 : IndexWidths::k32)};
  }
  const ops::CustomKernel* k = ops::custom_kernel(program.anchor_attrs.function);
  // Recording refuses a CPU-only kernel on CUDA; this guards any other way in.
  if (k->cuda_source.empty()) throw Error(ops::cpu_only_kernel_error(*k, "cuda"));
  return {k->name, render_cuda(program)};
}

void CudaDevice::throw_compile_error(const KernelSource& k, const absl::Status& s) {
  // The source goes next to the error, so the failing kernel can be read and rebuilt.
  const std::string path =
      absl::StrCat(std::filesystem::temp_directory_path().string(), "/kiln_failed_", k.name, ".cu");
  (void)base::write_file_atomically(path, [&](std::ostream& out) { out << k.source; });
  throw Error(absl::StrCat("[cuda] kernel ", k.name, " does not compile (source: ", path,
                           "): ", s.message()));
}

int CudaDevice::attribute(CUdevice dev, int attribute) const {
  absl::StatusOr<int> value = device_attribute(api_, dev, attribute);
  if (!value.ok()) throw Error(absl::StrCat(name_, ": ", value.status().message()));
  return *value;
}

// The kernel is opted in to all the dynamic shared memory the device gives a block beside the
// kernel's static arrays (the 48 KiB every launch may have counts both), so no launch has to
// opt in later, inside a graph capture. The attribute is a ceiling: each launch still gets
// what it asks for.
CudaDevice::Function CudaDevice::load(const std::string& cubin, const std::string& entry) const {
  const std::string what = absl::StrCat(name_, " kernel ", entry);
  CUmodule module = nullptr;
  throw_if_failed(api_.module_load_data(&module, cubin.data()), "cuModuleLoadData", what);
  CUfunction f = nullptr;
  throw_if_failed(api_.module_get_function(&f, module, entry.c_str()), "cuModuleGetFunction", what);
  int static_bytes = 0;
  throw_if_failed(api_.function_attribute(&static_bytes, kFunctionAttributeSharedSizeBytes, f),
                  "cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)", what);
  const int limit =
      std::max(0, std::max(max_shared_per_block_, kDefaultSharedPerBlock) - static_bytes);
  if (limit > kDefaultSharedPerBlock - static_bytes) {
    throw_if_failed(
        api_.function_set_attribute(f, kFunctionAttributeMaxDynamicSharedSizeBytes, limit),
        "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)", what);
  }
  return Function{f, limit};
}

}  // namespace kiln::runtime::cuda
