// The CUDA backend: preparing a plan's kernels, launching them, graph capture and replay for
// compiled functions, and its registry entry. About 800 lines; the launch and replay paths
// share the per-plan state kept here.
#include "runtime/cuda/cuda_backend.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/cache_dir.h"
#include "base/stats_counters.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/cubin_cache.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/cuda/device_collectives.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/launch_geometry.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/parallel_compile.h"

namespace kiln::runtime::cuda {
namespace {

void throw_if_failed(CUresult result, const char* call, const std::string& context) {
  absl::Status s = check_cuda(result, call);
  if (!s.ok()) throw Error(absl::StrCat(context, ": ", s.message()));
}

// For calls that release something, in cleanup paths and destructors: a failure loses the
// resource but not a result, so it is reported rather than thrown.
void report_if_failed(CUresult result, const char* call, const std::string& context) {
  absl::Status s = check_cuda(result, call);
  if (!s.ok()) {
    std::fprintf(stderr, "[kiln] %s: %s\n", context.c_str(), std::string(s.message()).c_str());
  }
}

// Whether two scalars are the same bits. Scalars are compared this way, never with ==: a NaN
// equals itself, -0 differs from 0, and a random seed (64 bits held in a double) is its bits.
bool same_bits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// KILN_CUDA_SYNC=1: every launch and copy is followed by a synchronize (docs/environment.md).
bool sync_requested() {
  const char* v = std::getenv("KILN_CUDA_SYNC");
  return v != nullptr && std::string(v) == "1";
}

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
  CudaDevice(int index, const DriverApi& api)
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

  // Device `index` of the process's driver (driver_api()), made on first use.
  static CudaDevice& get(int index) {
    const DriverApi& api = driver_api();
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (CudaDevice& d : devices()) {
      if (d.index_ == index && &d.api_ == &api) return d;
    }
    return devices().emplace_back(index, api);
  }

  void make_current() const {
    throw_if_failed(api_.ctx_set_current(context_), "cuCtxSetCurrent", name_);
  }

  std::shared_ptr<base::Buffer> allocate(int64_t nbytes) {
    DeviceAllocator::Block block = allocator_->allocate(static_cast<size_t>(nbytes));
    DeviceAllocator* allocator = allocator_.get();
    return std::make_shared<base::Buffer>(nbytes, Device{DeviceType::CUDA, index_}, block.address,
                                          [allocator, block] { allocator->release(block); });
  }

  void synchronize() const {
    throw_if_failed(api_.stream_synchronize(stream_), "cuStreamSynchronize", name_);
  }

  // The entry point of every kernel of `plan`, in order. Kernels not loaded yet are
  // rendered, then compiled together on all cores (memory and disk caches first), then
  // loaded; on a plan hit this is one lookup per kernel, with nothing rendered or compiled.
  // A kernel marked in `skip` (cuBLASLt runs it) is neither compiled nor looked up: its
  // Function stays null.
  std::vector<Function> prepare(const jit::LaunchPlan& plan, const std::vector<bool>& skip = {}) {
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

  // The entry point of kernel `k` alone, for a matmul planned on cuBLASLt that falls back.
  Function prepare_kernel(const jit::LaunchPlan& plan, size_t k) {
    std::vector<bool> skip(plan.kernels.size(), true);
    skip[k] = false;
    return prepare(plan, skip)[k];
  }

  // cuBLASLt on this GPU (cublaslt_matmul.h): it loads the library on first need.
  CublasLtMatmuls& cublaslt() { return *cublaslt_; }
  // Collectives on this GPU's stream (device_collectives.h); the stream mutex guards them.
  DeviceCollectives& collectives() { return *collectives_; }

  // `args`: a pointer to each kernel argument's bytes.
  void launch(CUfunction f, const int64_t grid[3], const int block[3], int shared_bytes,
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

  // Under KILN_CUDA_SYNC=1, waits for the work just issued (`what`: "kernel <name>", "copy
  // of ...") and raises its failure naming it: otherwise a kernel's fault surfaces at some
  // later call, named after that call. Nothing inside a capture, which cannot synchronize:
  // a graph's launch is checked as a whole (and a plan's first run is never captured).
  void checked(const std::string& what) const {
    if (!sync_each_call_ || capturing_) return;
    throw_if_failed(api_.stream_synchronize(stream_), "cuStreamSynchronize",
                    absl::StrCat(name_, " ", what, " (KILN_CUDA_SYNC=1: synchronized after it)"));
  }
  bool syncs_each_call() const { return sync_each_call_; }

  // The allocator frees nothing from the capture's start to its end, on any thread: a
  // cuMemFree synchronizes the device and would invalidate the capture.
  void begin_capture() {
    allocator_->begin_capture();
    if (const CUresult r = api_.stream_begin_capture(stream_, kStreamCaptureModeRelaxed); r != 0) {
      allocator_->end_capture();
      throw_if_failed(r, "cuStreamBeginCapture", name_);
    }
    capturing_ = true;
  }
  CUresult end_capture(CUgraph* graph) {
    capturing_ = false;
    const CUresult r = api_.stream_end_capture(stream_, graph);
    allocator_->end_capture();
    return r;
  }

  // During a capture, the node of the launch just issued: on Kiln's one stream, the one node
  // the stream's next work would follow.
  CUgraphNode captured_node() const {
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

  CUstream stream() const { return stream_; }
  const DriverApi& api() const { return api_; }
  // Held while issuing work to the stream, so a graph capture never records another
  // thread's work (and a copy never synchronizes a stream being captured). A thread never
  // holds two devices' at once (CudaBackend::place_inputs).
  std::recursive_mutex& stream_mutex() { return stream_mutex_; }
  int sm_count() const { return sm_count_; }
  const std::string& name() const { return name_; }

 private:
  static std::mutex& registry_mutex() {
    static std::mutex* m = new std::mutex();
    return *m;
  }
  static std::deque<CudaDevice>& devices() {
    static std::deque<CudaDevice>* d = new std::deque<CudaDevice>();  // never destroyed
    return *d;
  }

  static CubinCache& cubin_cache() {
    static CubinCache* cache = new CubinCache(base::default_cache_dir(), int64_t{1} << 30);
    return *cache;
  }

  // Whether kernel `k` needs the 64-bit entry point: some space or buffer it touches has
  // 2^31 - 2^26 elements or more (kernel_args.h). A user's kernel has its own single entry.
  static bool needs_wide_index(const jit::LaunchPlan& plan, size_t k) {
    const jit::PlannedKernel& pk = plan.kernels[k];
    if (pk.program->anchor == jit::AnchorKind::kCustomKernel) return false;
    std::vector<int64_t> numels;
    for (size_t i = 0; i < pk.launch.inputs.size(); ++i) {
      numels.push_back(plan.node_bytes[pk.launch.inputs[i]] /
                       dtype_size(pk.program->input_dtypes[i]));
    }
    for (size_t o = 0; o < pk.launch.outputs.size(); ++o) {
      numels.push_back(plan.node_bytes[pk.launch.outputs[o]] /
                       dtype_size(pk.program->output_dtypes[o]));
    }
    return !fits_32bit_index(pk.launch, numels);
  }

  // The module of a generated kernel with the one entry point a launch needs (the name is
  // the entry's), or a user's kernel after the argument struct it takes.
  static KernelSource module_source(const jit::KernelProgram& p, bool wide) {
    if (p.anchor != jit::AnchorKind::kCustomKernel) {
      return {entry_name(p, wide), render_cuda(p, wide ? IndexWidths::k64 : IndexWidths::k32)};
    }
    const ops::CustomKernel* k = ops::custom_kernel(p.anchor_attrs.function);
    // Recording refuses a CPU-only kernel on CUDA; this guards any other way in.
    if (k->cuda_source.empty()) throw Error(ops::cpu_only_kernel_error(*k, "cuda"));
    return {k->name, render_cuda(p)};
  }

  [[noreturn]] static void throw_compile_error(const KernelSource& k, const absl::Status& s) {
    // The source goes next to the error, so the failing kernel can be read and rebuilt.
    const std::string path = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                          "/kiln_failed_", k.name, ".cu");
    (void)base::write_file_atomically(path, [&](std::ostream& out) { out << k.source; });
    throw Error(absl::StrCat("[cuda] kernel ", k.name, " does not compile (source: ", path,
                             "): ", s.message()));
  }

  int attribute(CUdevice dev, int attribute) const {
    absl::StatusOr<int> value = device_attribute(api_, dev, attribute);
    if (!value.ok()) throw Error(absl::StrCat(name_, ": ", value.status().message()));
    return *value;
  }

  // Runs `call` (a driver call returning CUresult) with this device's context pushed on the
  // calling thread, whose own current context is restored afterwards.
  template <class Call>
  absl::Status in_context(Call call, const char* name) const {
    if (absl::Status s = check_cuda(api_.ctx_push_current(context_), "cuCtxPushCurrent"); !s.ok()) {
      return s;
    }
    absl::Status s = check_cuda(call(), name);
    CUcontext popped = nullptr;
    s.Update(check_cuda(api_.ctx_pop_current(&popped), "cuCtxPopCurrent"));
    return s;
  }

  // Loads a cubin and finds its entry point `entry`. The kernel is opted in to all the
  // dynamic shared memory the device gives a block beside the kernel's static arrays (the
  // 48 KiB every launch may have counts both), so no launch has to opt in later, inside a
  // graph capture. The attribute is a ceiling: each launch still gets what it asks for.
  Function load(const std::string& cubin, const std::string& entry) const {
    const std::string what = absl::StrCat(name_, " kernel ", entry);
    CUmodule module = nullptr;
    throw_if_failed(api_.module_load_data(&module, cubin.data()), "cuModuleLoadData", what);
    CUfunction f = nullptr;
    throw_if_failed(api_.module_get_function(&f, module, entry.c_str()), "cuModuleGetFunction",
                    what);
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

  // A loaded module: a program at one index width.
  using ModuleKey = std::pair<const jit::KernelProgram*, bool>;
  struct Loaded {
    std::shared_ptr<const jit::KernelProgram> program;  // keeps the key alive
    Function function;
  };

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

class CudaBackend final : public jit::Backend {
  struct PlanMatmuls;  // below

 public:
  explicit CudaBackend(int index) : index_(index), device_(CudaDevice::get(index)) {}

  void synchronize() override {
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    device_.make_current();
    device_.synchronize();
  }

  // For each matmul kernel, "cublaslt (...)" or "generated kernel (why)": what run() does
  // with buffers as the allocator gives them.
  std::string describe_plan(const jit::LaunchPlan& plan) override {
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    device_.make_current();
    std::string matmuls, collectives;
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      const jit::PlannedKernel& pk = plan.kernels[k];
      const std::string kernel = absl::StrCat("  kernel ", k, " (", pk.program->name, "): ");
      if (pk.program->anchor == jit::AnchorKind::kMatmul) {
        absl::StrAppend(&matmuls, kernel,
                        device_.cublaslt().choose(*pk.program, pk.launch).describe(), "\n");
      } else if (pk.program->anchor == jit::AnchorKind::kCollective) {
        absl::StrAppend(&collectives, kernel,
                        device_.collectives().describe(*pk.program, pk.launch), "\n");
      }
    }
    std::string out;
    if (!matmuls.empty()) absl::StrAppend(&out, device_.name(), " matmuls:\n", matmuls);
    if (!collectives.empty()) absl::StrAppend(&out, device_.name(), " collectives:\n", collectives);
    return out;
  }

  std::vector<std::shared_ptr<base::Buffer>> run(const jit::LaunchPlan& plan,
                                                 const jit::PlanArguments& args) override {
    const std::vector<std::shared_ptr<base::Buffer>> inputs = place_inputs(plan, args);
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    return run_placed(plan, args, inputs);
  }

  // run() once `inputs` (per plan input slot) are on this device, holding the stream mutex.
  // `matmuls`: the plan's (matmuls_of), when the caller has looked them up.
  std::vector<std::shared_ptr<base::Buffer>> run_placed(
      const jit::LaunchPlan& plan, const jit::PlanArguments& args,
      const std::vector<std::shared_ptr<base::Buffer>>& inputs,
      const PlanMatmuls* matmuls = nullptr) {
    device_.make_current();
    if (matmuls == nullptr) matmuls = &matmuls_of(plan);
    std::vector<CudaDevice::Function> functions = device_.prepare(plan, matmuls->on_cublaslt);
    Buffers buffers;
    for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
      buffers[plan.input_nodes[slot]] = inputs[slot];
    }
    const bool gathers = plan_gathers(plan);
    if (gathers) reset_index_error();
    launch_kernels(plan, *matmuls, functions, args.params, args.donated, buffers,
                   /*capture=*/nullptr);
    if (gathers) check_index_error();
    std::vector<std::shared_ptr<base::Buffer>> results;
    for (int o : plan.outputs) results.push_back(buffers.at(o));
    return results;
  }

  // A compiled function's plan of several kernels runs as one CUDA graph: captured on the
  // first replay, then launched with one call. The graph reads fixed input buffers: a slot
  // stays bound to the caller's buffer while every call passes that same buffer (weights),
  // and otherwise gets a buffer of its own that each call's argument is copied into
  // (activations; the one change re-captures the graph once). It writes buffers it owns,
  // and each call's outputs are fresh copies of them, so earlier results never change.
  // Changed scalars are written into the graph's launches in place, never re-captured. The
  // first call runs kernel by kernel, uncaptured: a failing kernel is then named (by
  // KILN_CUDA_SYNC=1 too), modules are loaded and the allocator warmed before any capture.
  std::vector<std::shared_ptr<base::Buffer>> replay(
      const std::shared_ptr<const jit::LaunchPlan>& plan, const jit::PlanArguments& args) override {
    // A collective's host-side checks (and a staged one's copies) cannot be captured.
    if (plan->kernels.size() < 2 || !graphs_enabled() || has_collective(*plan)) {
      return run(*plan, args);
    }
    const std::vector<std::shared_ptr<base::Buffer>> inputs = place_inputs(*plan, args);
    std::lock_guard<std::recursive_mutex> lock(device_.stream_mutex());
    device_.make_current();
    const PlanMatmuls& matmuls = matmuls_of(*plan);
    std::vector<CudaDevice::Function> functions = device_.prepare(*plan, matmuls.on_cublaslt);
    Graph& g = graph_for(plan);
    if (g.broken) return run_placed(*plan, args, inputs, &matmuls);
    bool capture = g.exec == nullptr;
    for (size_t slot = 0; slot < plan->input_nodes.size(); ++slot) {
      const std::shared_ptr<base::Buffer>& given = inputs[slot];
      if (g.slots[slot] == nullptr) {
        g.slots[slot] = given;
        capture = true;
      } else if (g.slots[slot] != given) {
        if (!g.copied[slot]) {
          g.slots[slot] = device_.allocate(given->nbytes());
          g.copied[slot] = true;
          capture = true;
        }
        copy_on_device(*g.slots[slot], *given);
      }
    }
    if (!g.ran_uncaptured) {
      g.ran_uncaptured = true;
      return run_placed(*plan, args, inputs, &matmuls);
    }
    const bool gathers = plan_gathers(*plan);
    if (gathers) reset_index_error();  // before the graph in stream order, never inside it
    try {
      if (capture) {
        capture_graph(*plan, matmuls, functions, args.params, g);
      } else {
        update_scalars(args.params, g);
      }
    } catch (const Error& e) {
      // An untested driver or an unsupported launch must not break a working function:
      // this plan replays without a graph from now on, and says so once.
      std::fprintf(stderr,
                   "[kiln] CUDA graph capture or update failed, replaying kernel by kernel: %s\n",
                   e.what());
      g.broken = true;
    }
    if (g.broken) return run_placed(*plan, args, inputs, &matmuls);
    throw_if_failed(device_.api().graph_launch(g.exec, device_.stream()), "cuGraphLaunch",
                    device_.name());
    base::counters().kernels_launched += g.launches;
    if (device_.syncs_each_call()) {
      std::vector<std::string> kernels;
      for (const jit::PlannedKernel& k : plan->kernels) kernels.push_back(k.program->name);
      device_.checked(absl::StrCat("graph of ", g.launches, " launches (kernels ",
                                   absl::StrJoin(kernels, ", "), ")"));
    }
    if (gathers) check_index_error();
    std::vector<std::shared_ptr<base::Buffer>> results;
    for (const std::shared_ptr<base::Buffer>& out : g.outputs) {
      results.push_back(device_.allocate(out->nbytes()));
      copy_on_device(*results.back(), *out);
    }
    return results;
  }

 private:
  using Buffers = absl::flat_hash_map<int, std::shared_ptr<base::Buffer>>;

  // A captured launch that reads some of the plan's scalars: what a call with other scalars
  // gives cuGraphExecKernelNodeSetParams to change it in place.
  struct ScalarLaunch {
    CUgraphNode node = nullptr;    // in Graph::graph
    KernelNodeParams launch;       // its function, grid, block and shared memory
    std::vector<std::byte> block;  // its Params, the scalars at `offset`
    SplitArgs split;               // its second argument
    size_t offset = 0;             // of Params::p
    std::vector<int> plan_params;  // per p[] slot, the plan's scalar
    std::string kernel;            // the program's name, for errors
  };

  // How a plan's matmul kernels run (matmuls_of): decided once, when the plan first runs.
  struct PlanMatmuls {
    uint64_t generation = 0;  // of the cuBLASLt library it was decided with
    // What the decision read: each kernel's program (kept, so no other program takes its
    // address) and each matmul kernel's launch. A freed plan's entry, found at the address
    // of a new plan, differs in one of them.
    std::vector<std::shared_ptr<const jit::KernelProgram>> programs;
    std::vector<std::pair<size_t, jit::KernelLaunch>> launches;
    std::vector<bool> on_cublaslt;                   // per kernel: cuBLASLt runs it
    std::vector<std::optional<CublasLtGemm>> gemms;  // per kernel: its call, where it does

    bool describes(const jit::LaunchPlan& plan) const {
      if (programs.size() != plan.kernels.size()) return false;
      for (size_t k = 0; k < programs.size(); ++k) {
        if (programs[k] != plan.kernels[k].program) return false;
      }
      for (const auto& [k, launch] : launches) {
        const jit::KernelLaunch& l = plan.kernels[k].launch;
        if (l.spaces != launch.spaces || l.views.size() != launch.views.size()) return false;
        for (size_t v = 0; v < l.views.size(); ++v) {
          if (l.views[v].strides != launch.views[v].strides ||
              l.views[v].offset != launch.views[v].offset) {
            return false;
          }
        }
      }
      return true;
    }
  };
  static constexpr size_t kMaxPlanMatmuls = 256;

  // A plan captured as a graph (see replay).
  struct Graph {
    std::weak_ptr<const jit::LaunchPlan> plan;
    // The captured graph is kept with its executable one: its nodes name the launches that
    // update_scalars changes in `exec`.
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    std::vector<std::shared_ptr<base::Buffer>> slots;  // per plan input slot, what the graph reads
    std::vector<bool> copied;                   // per slot: Kiln's buffer, arguments copied in
    std::vector<double> params;                 // the scalars its launches have now
    std::vector<ScalarLaunch> scalar_launches;  // its launches that read any
    std::vector<std::shared_ptr<base::Buffer>> owned;    // every buffer its kernels write
    std::vector<std::shared_ptr<base::Buffer>> outputs;  // per plan output
    int64_t launches = 0;                                // kernel launches it replays
    bool ran_uncaptured = false;                         // the plan's first call has run
    bool broken = false;                                 // capture failed: replay without a graph
  };

  Device here() const { return Device{DeviceType::CUDA, index_}; }

  // The plan's inputs, per slot, on this device. Called before this device's stream mutex
  // is taken: a copy from another GPU holds that GPU's stream mutex, and a thread holding
  // two at once deadlocks with one moving tensors the other way. No thread ever holds two.
  std::vector<std::shared_ptr<base::Buffer>> place_inputs(const jit::LaunchPlan& plan,
                                                          const jit::PlanArguments& args) const {
    std::vector<std::shared_ptr<base::Buffer>> inputs;
    inputs.reserve(plan.input_nodes.size());
    for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
      inputs.push_back(jit::place_on(args.inputs[slot], here()));
    }
    return inputs;
  }

  static bool plan_gathers(const jit::LaunchPlan& plan) {
    for (const jit::PlannedKernel& k : plan.kernels) {
      if (has_gathers(*k.program)) return true;
    }
    return false;
  }

  // Out-of-range indices (ops/gather.h): every gather reports into one IndexErrorWord on the
  // device. It is zeroed before a plan with gathers runs, and read after it (which waits for
  // the plan): the run then raises the first report. The word is made on first use, outside
  // any graph capture.
  void reset_index_error() {
    static const IndexErrorWord kZero;
    if (index_error_ == nullptr) index_error_ = device_.allocate(sizeof(IndexErrorWord));
    throw_if_failed(device_.api().memcpy_htod_async(index_error_->device_pointer(), &kZero,
                                                    sizeof kZero, device_.stream()),
                    "cuMemcpyHtoDAsync", device_.name());
    device_.checked("copy of the index error word to the device");
  }
  void check_index_error() {
    IndexErrorWord word;
    throw_if_failed(device_.api().memcpy_dtoh_async(&word, index_error_->device_pointer(),
                                                    sizeof word, device_.stream()),
                    "cuMemcpyDtoHAsync", device_.name());
    device_.synchronize();
    throw_if_index_error(word);
  }

  static bool has_collective(const jit::LaunchPlan& plan) {
    return std::any_of(plan.kernels.begin(), plan.kernels.end(), [](const jit::PlannedKernel& k) {
      return k.program->anchor == jit::AnchorKind::kCollective;
    });
  }

  static bool graphs_enabled() {
    static const bool enabled = [] {
      const char* v = std::getenv("KILN_CUDA_GRAPHS");
      return v == nullptr || std::string(v) != "0";
    }();
    return enabled;
  }

  // The graph record of `plan`, fresh if the plan is new (or an old plan's address reused).
  Graph& graph_for(const std::shared_ptr<const jit::LaunchPlan>& plan) {
    if (graphs_.size() >= 64) {  // forget the graphs of plans nobody holds any more
      for (auto it = graphs_.begin(); it != graphs_.end();) {
        if (it->second.plan.expired()) {
          destroy(it->second);
          graphs_.erase(it++);
        } else {
          ++it;
        }
      }
    }
    Graph& g = graphs_[plan.get()];
    if (g.plan.lock() != plan) {
      destroy(g);
      g = Graph{};
      g.plan = plan;
      g.slots.resize(plan->input_nodes.size());
      g.copied.assign(plan->input_nodes.size(), false);
    }
    return g;
  }

  void destroy(Graph& g) {
    if (g.exec != nullptr) {
      report_if_failed(device_.api().graph_exec_destroy(g.exec), "cuGraphExecDestroy",
                       device_.name());
    }
    if (g.graph != nullptr) {
      report_if_failed(device_.api().graph_destroy(g.graph), "cuGraphDestroy", device_.name());
    }
    g.exec = nullptr;
    g.graph = nullptr;
    g.scalar_launches.clear();
  }

  // Records the plan's launches over the graph's slots into a new executable graph.
  void capture_graph(const jit::LaunchPlan& plan, const PlanMatmuls& matmuls,
                     std::vector<CudaDevice::Function>& functions,
                     const std::vector<double>& params, Graph& g) {
    destroy(g);
    g.owned.clear();
    Buffers buffers;
    for (size_t slot = 0; slot < plan.input_nodes.size(); ++slot) {
      buffers[plan.input_nodes[slot]] = g.slots[slot];
    }
    const DriverApi& d = device_.api();
    device_.begin_capture();
    const int64_t launched_before = base::counters().kernels_launched;
    CUgraph graph = nullptr;
    try {
      launch_kernels(plan, matmuls, functions, params, /*donated=*/{}, buffers, &g);
    } catch (...) {
      // The launch's error is the one to raise; these only clean up after it.
      report_if_failed(device_.end_capture(&graph), "cuStreamEndCapture", device_.name());
      if (graph != nullptr)
        report_if_failed(d.graph_destroy(graph), "cuGraphDestroy", device_.name());
      throw;
    }
    g.launches = base::counters().kernels_launched - launched_before;
    base::counters().kernels_launched -= g.launches;  // captured, not run: replay counts them
    throw_if_failed(device_.end_capture(&graph), "cuStreamEndCapture", device_.name());
    if (const CUresult made = d.graph_instantiate(&g.exec, graph, 0); made != 0) {
      g.exec = nullptr;
      report_if_failed(d.graph_destroy(graph), "cuGraphDestroy", device_.name());
      throw_if_failed(made, "cuGraphInstantiateWithFlags", device_.name());
    }
    g.graph = graph;
    g.params = params;
    g.outputs.clear();
    for (int o : plan.outputs) g.outputs.push_back(buffers.at(o));
  }

  // Gives the graph's launches this call's scalars where they differ from the last call's,
  // bit for bit (same_bits): each launch that reads a changed one gets its Params again, in
  // place, so a step counter or a temperature neither re-captures nor re-instantiates.
  void update_scalars(const std::vector<double>& params, Graph& g) {
    if (same_bits(params, g.params)) return;
    for (ScalarLaunch& s : g.scalar_launches) {
      bool changed = false;
      for (size_t i = 0; i < s.plan_params.size(); ++i) {
        const double value = params[s.plan_params[i]];
        changed = changed || !same_bits(value, g.params[s.plan_params[i]]);
        std::memcpy(s.block.data() + s.offset + sizeof(double) * i, &value, sizeof value);
      }
      if (!changed) continue;
      void* kernel_args[] = {s.block.data(), &s.split};
      KernelNodeParams launch = s.launch;
      launch.kernel_params = kernel_args;
      throw_if_failed(device_.api().graph_exec_kernel_node_set_params(g.exec, s.node, &launch),
                      "cuGraphExecKernelNodeSetParams_v2",
                      absl::StrCat(device_.name(), " kernel ", s.kernel));
    }
    g.params = params;
  }

  void copy_on_device(const base::Buffer& to, const base::Buffer& from) {
    if (from.nbytes() == 0) return;
    throw_if_failed(
        device_.api().memcpy_dtod_async(to.device_pointer(), from.device_pointer(),
                                        static_cast<size_t>(from.nbytes()), device_.stream()),
        "cuMemcpyDtoDAsync", device_.name());
    if (device_.syncs_each_call()) {
      device_.checked(absl::StrCat("copy of ", from.nbytes(), " bytes on the device"));
    }
  }

  // Launches every kernel of `plan` (`functions`: their entry points, from prepare);
  // `buffers` maps the plan's input nodes to their buffers
  // and receives every node it computes. Each kernel's intermediates are released after their
  // last reader (stream order makes reuse safe). While `capture` is captured, it keeps every
  // buffer written (its replays write them again) and each launch that reads a scalar.
  // An update_slice's output starts as its x: x's own buffer where `donated` allows
  // (jit::donated_slot), else a copy. A matmul planned on cuBLASLt (its Function null) runs
  // as one cuBLASLt call (`matmuls`' gemm), or else its kernel is compiled now and launched.
  void launch_kernels(const jit::LaunchPlan& plan, const PlanMatmuls& matmuls,
                      std::vector<CudaDevice::Function>& functions,
                      const std::vector<double>& plan_params, const std::vector<bool>& donated,
                      Buffers& buffers, Graph* capture) {
    auto allocate = [&](int64_t bytes) {
      std::shared_ptr<base::Buffer> b = device_.allocate(bytes);
      if (capture != nullptr) capture->owned.push_back(b);
      return b;
    };
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      const jit::PlannedKernel& pk = plan.kernels[k];
      const jit::KernelLaunch& l = pk.launch;
      std::vector<uint64_t> ins, outs;
      for (int n : l.inputs) ins.push_back(buffers.at(n)->device_pointer());
      for (int n : l.outputs) {
        if (pk.program->anchor != jit::AnchorKind::kUpdateSlice) {
          buffers[n] = allocate(plan.node_bytes[n]);
        } else if (jit::donated_slot(plan, donated, l) >= 0) {
          // Copied out first: `buffers[n]` may insert and rehash, which would leave a
          // reference into the map dangling.
          std::shared_ptr<base::Buffer> x = buffers.at(l.inputs[0]);
          buffers[n] = std::move(x);
        } else {
          buffers[n] = allocate(plan.node_bytes[n]);
          copy_on_device(*buffers[n], *buffers.at(l.inputs[0]));
        }
        outs.push_back(buffers[n]->device_pointer());
      }
      if (pk.program->anchor == jit::AnchorKind::kCollective) {
        // Never captured: replay() runs plans with collectives without a graph.
        device_.collectives().run(*pk.program, l, ins.empty() ? 0 : ins[0], outs[0]);
        base::counters().kernels_launched += 1;
        for (int n : plan.release_after[k]) buffers.erase(n);
        continue;
      }
      if (functions[k].handle == nullptr) {  // planned on cuBLASLt
        if (launch_cublaslt(pk, *matmuls.gemms[k], ins, outs)) {
          for (int n : plan.release_after[k]) buffers.erase(n);
          continue;
        }
        functions[k] = device_.prepare_kernel(plan, k);
      }
      if (pk.program->anchor == jit::AnchorKind::kCustomKernel) {
        launch_custom(functions[k].handle, pk.program.get(), l, ins, outs[0]);
      } else {
        std::vector<double> params;
        for (int p : l.params) params.push_back(plan_params[p]);
        std::vector<std::byte> block =
            pack_params(*pk.program, l, ins, outs, params,
                        index_error_ != nullptr ? index_error_->device_pointer() : 0);
        const LaunchSchedule schedule = schedule_launches(*pk.program, l, device_.sm_count(),
                                                          functions[k].dynamic_shared_limit);
        std::shared_ptr<base::Buffer> scratch;
        if (schedule.scratch_bytes > 0) scratch = allocate(schedule.scratch_bytes);
        for (const LaunchStep& step : schedule.steps) {
          SplitArgs split{scratch ? scratch->device_pointer() : 0, step.chunks, step.phase};
          const int64_t grid[3] = {step.grid_x, step.grid_y, 1};
          const int threads[3] = {step.block, 1, 1};
          void* kernel_args[] = {block.data(), &split};
          device_.launch(functions[k].handle, grid, threads, step.shared_bytes, kernel_args,
                         pk.program->name);
          if (capture != nullptr && !l.params.empty()) {
            ScalarLaunch& s = capture->scalar_launches.emplace_back();
            s.node = device_.captured_node();
            s.launch.function = functions[k].handle;
            for (int d = 0; d < 3; ++d) {
              s.launch.grid[d] = static_cast<unsigned>(grid[d]);
              s.launch.block[d] = static_cast<unsigned>(threads[d]);
            }
            s.launch.shared_bytes = static_cast<unsigned>(step.shared_bytes);
            s.block = block;
            s.split = split;
            s.offset = params_layout(*pk.program).p;
            s.plan_params = l.params;
            s.kernel = pk.program->name;
          }
        }
      }
      for (int n : plan.release_after[k]) buffers.erase(n);
    }
  }

  // Which kernels of `plan` cuBLASLt runs, as the plan dump says (describe_plan): those are
  // not compiled. Decided once per plan (and cuBLASLt library): a later run of the plan costs
  // one lookup and a check that the entry is this plan's, not a freed plan's at the same
  // address. The device's context must be current; the stream mutex guards the map.
  const PlanMatmuls& matmuls_of(const jit::LaunchPlan& plan) {
    const uint64_t generation = cublaslt_api_generation();
    std::unique_ptr<PlanMatmuls>& m = plan_matmuls_[&plan];
    if (m != nullptr && m->generation == generation && m->describes(plan)) return *m;
    if (m == nullptr && plan_matmuls_.size() > kMaxPlanMatmuls) {
      // Plans nobody holds cannot be told from live ones here: forget them all; each live
      // plan decides again (cheaply: cuBLASLt keeps its problems) on its next run.
      plan_matmuls_.clear();
      return matmuls_of(plan);
    }
    m = std::make_unique<PlanMatmuls>();
    m->generation = generation;
    m->on_cublaslt.assign(plan.kernels.size(), false);
    m->gemms.resize(plan.kernels.size());
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      const jit::PlannedKernel& pk = plan.kernels[k];
      m->programs.push_back(pk.program);
      if (pk.program->anchor != jit::AnchorKind::kMatmul) continue;
      m->launches.emplace_back(k, pk.launch);
      MatmulChoice c = device_.cublaslt().choose(*pk.program, pk.launch);
      m->on_cublaslt[k] = c.cublaslt();
      m->gemms[k] = c.gemm;
    }
    return *m;
  }

  // Runs matmul kernel `pk` as `gemm` (its plan's, matmuls_of) through cuBLASLt over these
  // buffers; false when cuBLASLt has no algorithm for their alignment, takes no bias at
  // their offset, or its call failed (said once, cublaslt_matmul.h): the caller then launches
  // the generated kernel.
  bool launch_cublaslt(const jit::PlannedKernel& pk, const CublasLtGemm& gemm,
                       const std::vector<uint64_t>& ins, const std::vector<uint64_t>& outs) {
    if (!device_.cublaslt().run(gemm, KernelPointers{ins, outs}, device_.stream()).ok()) {
      return false;
    }
    base::counters().kernels_launched += 1;
    device_.checked(absl::StrCat("cuBLASLt matmul ", pk.program->name));
    return true;
  }

  void launch_custom(CUfunction f, const jit::KernelProgram* program, const jit::KernelLaunch& l,
                     const std::vector<uint64_t>& ins, uint64_t out) {
    CustomKernelCall call = prepare_custom_kernel_call(*program, l, ins, out);
    void* args[] = {call.args.data()};
    device_.launch(f, call.geometry.grid, call.geometry.block, call.geometry.shared_bytes, args,
                   ops::custom_kernel(program->anchor_attrs.function)->name);
  }

  int index_;
  CudaDevice& device_;
  std::shared_ptr<base::Buffer> index_error_;  // the device's IndexErrorWord, once a plan gathers
  absl::flat_hash_map<const jit::LaunchPlan*, Graph> graphs_;  // guarded by the stream mutex
  // Per plan, what matmuls_of decided; guarded by the stream mutex.
  absl::flat_hash_map<const jit::LaunchPlan*, std::unique_ptr<PlanMatmuls>> plan_matmuls_;
};

// CUDA C++ for dumps and explain_plan; needs no GPU. Custom source is checked by NVRTC for
// sm_80 where NVRTC loads (a machine without it cannot run the source anyway).
class CudaSourceRenderer final : public jit::SourceRenderer {
 public:
  std::string language() const override { return "CUDA C++"; }
  std::string file_extension() const override { return ".cu"; }
  std::string render(const jit::KernelProgram& program) const override {
    return render_cuda(program);
  }
  absl::Status check(const std::string& source, const std::string& name) const override {
    if (!nvrtc_available().ok()) return absl::OkStatus();
    return compile_to_cubin(source, name, 80).status();
  }
};

}  // namespace

absl::Status cuda_available() {
  absl::StatusOr<std::vector<DeviceInfo>> devices = query_devices();
  if (!devices.ok()) return devices.status();
  if (devices->empty()) return absl::UnavailableError("the CUDA driver sees no GPU");
  if (absl::Status s = nvrtc_available(); !s.ok()) return s;
  return driver_api().status;
}

std::unique_ptr<jit::Backend> make_cuda_backend(int device_index) {
  return std::make_unique<CudaBackend>(device_index);
}

jit::BackendFactory cuda_backend_factory() {
  jit::BackendFactory f;
  f.name = "CUDA";
  f.device_count = []() -> absl::StatusOr<int> {
    if (absl::Status s = cuda_available(); !s.ok()) return s;
    absl::StatusOr<std::vector<DeviceInfo>> devices = query_devices();
    if (!devices.ok()) return devices.status();
    return static_cast<int>(devices->size());
  };
  f.make = make_cuda_backend;
  f.renderer = std::make_shared<CudaSourceRenderer>();
  f.setting = "cuda";
  f.preferred_by_auto = true;
  f.copy_to_host = copy_to_host;
  f.upload = upload;
  return f;
}

std::shared_ptr<base::Buffer> copy_to_host(const base::Buffer& device_buffer) {
  CudaDevice& d = CudaDevice::get(device_buffer.device().index);
  std::lock_guard<std::recursive_mutex> lock(d.stream_mutex());
  d.make_current();
  auto host = std::make_shared<base::Buffer>(device_buffer.nbytes());
  if (device_buffer.nbytes() > 0) {
    throw_if_failed(
        d.api().memcpy_dtoh_async(host->data(), device_buffer.device_pointer(),
                                  static_cast<size_t>(device_buffer.nbytes()), d.stream()),
        "cuMemcpyDtoHAsync", d.name());
    d.checked(absl::StrCat("copy of ", device_buffer.nbytes(), " bytes to the host"));
  }
  d.synchronize();
  return host;
}

std::shared_ptr<base::Buffer> upload(const base::Buffer& host_buffer, Device device) {
  CudaDevice& d = CudaDevice::get(device.index);
  std::lock_guard<std::recursive_mutex> lock(d.stream_mutex());
  d.make_current();
  std::shared_ptr<base::Buffer> out = d.allocate(host_buffer.nbytes());
  if (host_buffer.nbytes() > 0) {
    throw_if_failed(
        d.api().memcpy_htod_async(out->device_pointer(), host_buffer.data(),
                                  static_cast<size_t>(host_buffer.nbytes()), d.stream()),
        "cuMemcpyHtoDAsync", d.name());
    d.checked(absl::StrCat("copy of ", host_buffer.nbytes(), " bytes to the device"));
  }
  // The host buffer may be freed as soon as this returns: wait for the copy.
  d.synchronize();
  return out;
}

}  // namespace kiln::runtime::cuda
