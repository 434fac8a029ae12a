#include "tests/cuda_emulation/emulated_driver.h"

#include <elf.h>
#include <sys/mman.h>

#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"

namespace kiln::testing {
namespace {

using runtime::cuda::CUcontext;
using runtime::cuda::CUdevice;
using runtime::cuda::CUdeviceptr;
using runtime::cuda::CUfunction;
using runtime::cuda::CUgraph;
using runtime::cuda::CUgraphExec;
using runtime::cuda::CUgraphNode;
using runtime::cuda::CUmodule;
using runtime::cuda::CUresult;
using runtime::cuda::CUstream;
using runtime::cuda::KernelNodeParams;

// The CUresult codes the emulation returns, with the driver's names and texts.
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidImage = 200;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kIllegalState = 401;
constexpr CUresult kNotFound = 500;
constexpr CUresult kIllegalAddress = 700;
constexpr CUresult kCaptureUnsupported = 900;
constexpr CUresult kCaptureInvalidated = 901;

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kInvalidImage, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {kIllegalState, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed"},
    {kNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {kCaptureInvalidated, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {kCaptureUnsupported, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
};

const ErrorText* error_text(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

struct Context {
  int gpu = 0;
};

// A copy's work. Runs with the state's lock held.
using Op = std::function<void()>;

// Work a stream runs when issued, or a graph at its launch: a copy, or a kernel's launch
// (recorded, with the arguments it was given).
struct Node {
  Op op;  // a copy's
  bool kernel = false;
  EmulatedLaunch launch;  // a kernel's
};

// A graph being captured or captured, or an executable graph made from one. A node's handle
// is its address in the graph it was captured into; node i of an executable graph is node i
// of its source.
struct Graph {
  Context* context = nullptr;
  std::deque<Node> nodes;         // in issue order; a deque keeps handles valid while it grows
  const Graph* source = nullptr;  // an executable graph's
};

struct Stream {
  Context* context = nullptr;
  Graph* capture = nullptr;               // while capturing: the graph it captures into
  bool capture_invalidated = false;       // a free on its GPU broke the capture
  uint64_t captures = 0;                  // the id of its last capture
  std::vector<CUgraphNode> dependencies;  // cuStreamGetCaptureInfo_v2's last answer
};

struct Function {
  Context* context = nullptr;
  std::string name;
  int static_shared = 0;
  int max_dynamic_shared = 0;       // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  std::vector<int> argument_sizes;  // per argument, its size in bytes
};

struct Module {
  std::deque<Function> functions;
};

struct Allocation {
  size_t bytes = 0;
  int gpu = 0;
};

struct State {
  std::mutex mutex;
  std::function<void(std::string_view)> before_call;
  bool initialized = false;
  std::array<EmulatedGpu, EmulatedDriver::kGpus> gpus;
  std::array<Context, EmulatedDriver::kGpus> contexts;
  // Never freed: the backend keeps its streams, modules and functions for the process.
  std::deque<Stream> streams;
  std::deque<Module> modules;
  std::set<const void*> live_handles;  // streams, modules, functions, graphs
  std::set<Graph*> graphs;
  std::map<uint64_t, Allocation> allocations;  // by address
  // Per GPU: a kernel faulted there. As on the driver, the fault is sticky: every later call
  // that needs the GPU's context, or synchronizes its stream, fails with it.
  std::array<bool, EmulatedDriver::kGpus> faulted{};
  std::vector<std::string> failures;
  std::vector<EmulatedLaunch> launches;
  std::map<std::string, int64_t, std::less<>> calls;

  State() {
    for (int i = 0; i < EmulatedDriver::kGpus; ++i) contexts[i].gpu = i;
  }
};

State& state() {
  static State* s = new State();  // never destroyed, as the driver it stands for
  return *s;
}

// Each thread's stack of current contexts; the top is current.
thread_local std::vector<Context*> current_contexts;

Context* current_context() { return current_contexts.empty() ? nullptr : current_contexts.back(); }

// One entry point's call: runs the test's hook, then holds the state's lock until it
// returns through done(), which records a failure.
class Call {
 public:
  explicit Call(const char* name) : name_(name) {
    std::function<void(std::string_view)> hook;
    {
      std::lock_guard<std::mutex> lock(state().mutex);
      hook = state().before_call;
      auto it = state().calls.find(name_);
      if (it == state().calls.end()) it = state().calls.emplace(name_, 0).first;
      ++it->second;
    }
    if (hook) hook(name_);
    lock_ = std::unique_lock<std::mutex>(state().mutex);
  }

  CUresult done(CUresult result) {
    if (result != kSuccess) {
      const ErrorText* e = error_text(result);
      state().failures.push_back(
          absl::StrCat(name_, ": ", e != nullptr ? e->name : absl::StrCat("CUresult ", result)));
    }
    return result;
  }

  // The usual checks before work: initialized, a context current, and no fault on its GPU.
  CUresult needs_context() const {
    if (!state().initialized) return kNotInitialized;
    if (current_context() == nullptr) return kInvalidContext;
    return state().faulted[current_context()->gpu] ? kIllegalAddress : kSuccess;
  }

  // ... and a valid stream whose context is the current one.
  CUresult needs_stream(CUstream handle, Stream** stream) const {
    if (CUresult r = needs_context(); r != kSuccess) return r;
    if (!state().live_handles.contains(handle)) return kInvalidHandle;
    *stream = reinterpret_cast<Stream*>(handle);
    return (*stream)->context == current_context() ? kSuccess : kInvalidContext;
  }

 private:
  const char* name_;
  std::unique_lock<std::mutex> lock_;
};

// Runs `node`'s work: a copy's, or a kernel's launch, which faults the GPU if the test made
// its kernel the faulting one.
void run(const Node& node) {
  if (!node.kernel) {
    node.op();
    return;
  }
  const EmulatedLaunch& launch = node.launch;
  state().launches.push_back(launch);
  if (launch.function == state().gpus[launch.gpu].faulting_kernel) {
    state().faulted[launch.gpu] = true;
  }
}

// Runs `node` now, or records it into the stream's capture.
void issue(Stream* stream, Node node) {
  if (stream->capture != nullptr) {
    stream->capture->nodes.push_back(std::move(node));
  } else {
    run(node);
  }
}

Node copy_node(Op op) {
  Node node;
  node.op = std::move(op);
  return node;
}

// Whether [address, address + bytes) lies inside one live allocation on `gpu`.
bool on_device(uint64_t address, size_t bytes, int gpu) {
  auto it = state().allocations.upper_bound(address);
  if (it == state().allocations.begin()) return false;
  --it;
  return it->second.gpu == gpu && address + bytes <= it->first + it->second.bytes;
}

// An entry point of a cubin, as the driver reads it.
struct EntryPoint {
  int static_shared = 0;            // its .nv.shared.<name> section's size
  std::vector<int> argument_sizes;  // from its .nv.info.<name> section
};

// The argument sizes in a .nv.info.<name> section: a list of attributes, each a format
// byte, an attribute byte and a value (none, 1 byte, 2 bytes, or a 2-byte size and that
// many bytes). EIATTR_KPARAM_INFO (0x17) describes one argument: 4 bytes of index, a 2-byte
// ordinal, a 2-byte offset, then 4 bytes whose top 14 bits are its size.
std::vector<int> read_argument_sizes(const char* info, size_t bytes) {
  constexpr uint8_t kNoValue = 1, kByte = 2, kHalf = 3, kSized = 4, kParamInfo = 0x17;
  std::vector<int> sizes;
  size_t at = 0;
  while (at + 2 <= bytes) {
    const auto format = static_cast<uint8_t>(info[at]);
    const auto attribute = static_cast<uint8_t>(info[at + 1]);
    at += 2;
    if (format == kNoValue) continue;
    if (format == kByte || format == kHalf) {
      at += format == kByte ? 1 : 2;
      continue;
    }
    if (format != kSized || at + 2 > bytes) break;  // not a format the driver has
    uint16_t size = 0;
    std::memcpy(&size, info + at, 2);
    at += 2;
    if (attribute == kParamInfo && size >= 12 && at + size <= bytes) {
      uint16_t ordinal = 0;
      uint32_t word = 0;
      std::memcpy(&ordinal, info + at + 4, 2);
      std::memcpy(&word, info + at + 8, 4);
      if (sizes.size() <= ordinal) sizes.resize(ordinal + 1u, 0);
      sizes[ordinal] = static_cast<int>(word >> 18);
    }
    at += size;
  }
  return sizes;
}

// The entry points of cubin `image` (its .text.<name> sections), as the driver reads them.
// False when the image is not a 64-bit ELF file.
bool read_cubin(const void* image, std::map<std::string, EntryPoint>* functions) {
  const auto* base = static_cast<const char*>(image);
  Elf64_Ehdr header;
  std::memcpy(&header, base, sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_shstrndx >= header.e_shnum) {
    return false;
  }
  auto section = [&](int i) {
    Elf64_Shdr s;
    std::memcpy(&s, base + header.e_shoff + static_cast<size_t>(i) * header.e_shentsize, sizeof s);
    return s;
  };
  const char* names = base + section(header.e_shstrndx).sh_offset;
  std::map<std::string, EntryPoint> found;  // also sections of names with no .text
  for (int i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr s = section(i);
    const std::string_view name(names + s.sh_name);
    if (name.starts_with(".text.")) (*functions)[std::string(name.substr(6))];
    if (name.starts_with(".nv.shared.")) {
      found[std::string(name.substr(11))].static_shared = static_cast<int>(s.sh_size);
    }
    if (name.starts_with(".nv.info.")) {
      found[std::string(name.substr(9))].argument_sizes =
          read_argument_sizes(base + s.sh_offset, s.sh_size);
    }
  }
  for (auto& [name, entry] : *functions) {
    if (auto it = found.find(name); it != found.end()) entry = it->second;
  }
  return true;
}

CUresult init(unsigned int) {
  Call call("cuInit");
  state().initialized = true;
  return call.done(kSuccess);
}

CUresult device_count(int* count) {
  Call call("cuDeviceGetCount");
  if (!state().initialized) return call.done(kNotInitialized);
  *count = EmulatedDriver::kGpus;
  return call.done(kSuccess);
}

CUresult device_get(CUdevice* device, int ordinal) {
  Call call("cuDeviceGet");
  if (!state().initialized) return call.done(kNotInitialized);
  if (ordinal < 0 || ordinal >= EmulatedDriver::kGpus) return call.done(kInvalidDevice);
  *device = ordinal;
  return call.done(kSuccess);
}

CUresult device_name(char* name, int length, CUdevice device) {
  Call call("cuDeviceGetName");
  if (!state().initialized) return call.done(kNotInitialized);
  if (device < 0 || device >= EmulatedDriver::kGpus) return call.done(kInvalidDevice);
  if (length <= 0) return call.done(kInvalidValue);
  const std::string& n = state().gpus[device].name;
  const size_t copied = std::min(n.size(), static_cast<size_t>(length - 1));
  std::memcpy(name, n.data(), copied);
  name[copied] = '\0';
  return call.done(kSuccess);
}

CUresult device_memory(size_t* bytes, CUdevice device) {
  Call call("cuDeviceTotalMem_v2");
  if (!state().initialized) return call.done(kNotInitialized);
  if (device < 0 || device >= EmulatedDriver::kGpus) return call.done(kInvalidDevice);
  *bytes = static_cast<size_t>(state().gpus[device].memory_bytes);
  return call.done(kSuccess);
}

CUresult device_attribute(int* value, int attribute, CUdevice device) {
  Call call("cuDeviceGetAttribute");
  if (!state().initialized) return call.done(kNotInitialized);
  if (device < 0 || device >= EmulatedDriver::kGpus) return call.done(kInvalidDevice);
  const EmulatedGpu& gpu = state().gpus[device];
  if (attribute == gpu.failing_attribute) return call.done(kInvalidValue);
  switch (attribute) {
    case runtime::cuda::kAttributeMultiprocessorCount:
      *value = gpu.sm_count;
      return call.done(kSuccess);
    case runtime::cuda::kAttributeComputeMajor:
      *value = gpu.compute_major;
      return call.done(kSuccess);
    case runtime::cuda::kAttributeComputeMinor:
      *value = gpu.compute_minor;
      return call.done(kSuccess);
    case runtime::cuda::kAttributeMaxSharedPerBlockOptin:
      *value = gpu.max_shared_per_block_optin;
      return call.done(kSuccess);
  }
  return call.done(kInvalidValue);  // not one the emulation knows
}

CUresult primary_ctx_retain(CUcontext* context, CUdevice device) {
  Call call("cuDevicePrimaryCtxRetain");
  if (!state().initialized) return call.done(kNotInitialized);
  if (device < 0 || device >= EmulatedDriver::kGpus) return call.done(kInvalidDevice);
  *context = reinterpret_cast<CUcontext>(&state().contexts[device]);
  return call.done(kSuccess);
}

bool valid_context(CUcontext context) {
  const auto* c = reinterpret_cast<const Context*>(context);
  return c >= state().contexts.data() && c < state().contexts.data() + EmulatedDriver::kGpus;
}

CUresult ctx_set_current(CUcontext context) {
  Call call("cuCtxSetCurrent");
  if (!state().initialized) return call.done(kNotInitialized);
  if (context == nullptr) {
    if (!current_contexts.empty()) current_contexts.pop_back();
    return call.done(kSuccess);
  }
  if (!valid_context(context)) return call.done(kInvalidContext);
  if (current_contexts.empty()) current_contexts.push_back(nullptr);
  current_contexts.back() = reinterpret_cast<Context*>(context);
  return call.done(kSuccess);
}

CUresult ctx_push_current(CUcontext context) {
  Call call("cuCtxPushCurrent_v2");
  if (!state().initialized) return call.done(kNotInitialized);
  if (!valid_context(context)) return call.done(kInvalidContext);
  current_contexts.push_back(reinterpret_cast<Context*>(context));
  return call.done(kSuccess);
}

CUresult ctx_pop_current(CUcontext* context) {
  Call call("cuCtxPopCurrent_v2");
  if (!state().initialized) return call.done(kNotInitialized);
  if (current_contexts.empty()) return call.done(kInvalidContext);
  if (context != nullptr) *context = reinterpret_cast<CUcontext>(current_contexts.back());
  current_contexts.pop_back();
  return call.done(kSuccess);
}

CUresult stream_create(CUstream* stream, unsigned int) {
  Call call("cuStreamCreate");
  if (CUresult r = call.needs_context(); r != kSuccess) return call.done(r);
  Stream& s = state().streams.emplace_back();
  s.context = current_context();
  state().live_handles.insert(&s);
  *stream = reinterpret_cast<CUstream>(&s);
  return call.done(kSuccess);
}

CUresult stream_synchronize(CUstream handle) {
  Call call("cuStreamSynchronize");
  if (!state().initialized) return call.done(kNotInitialized);
  if (!state().live_handles.contains(handle)) return call.done(kInvalidHandle);
  // Work runs when issued: there is nothing to wait for, but a capture forbids the wait,
  // and a fault is reported here.
  const Stream& stream = *reinterpret_cast<Stream*>(handle);
  if (stream.capture != nullptr) return call.done(kCaptureUnsupported);
  if (state().faulted[stream.context->gpu]) return call.done(kIllegalAddress);
  return call.done(kSuccess);
}

// Work runs when issued, so a stream is always done (or has faulted).
CUresult stream_query(CUstream handle) {
  Call call("cuStreamQuery");
  if (!state().initialized) return call.done(kNotInitialized);
  if (!state().live_handles.contains(handle)) return call.done(kInvalidHandle);
  const Stream& stream = *reinterpret_cast<Stream*>(handle);
  if (state().faulted[stream.context->gpu]) return call.done(kIllegalAddress);
  return call.done(kSuccess);
}

CUresult mem_alloc(CUdeviceptr* address, size_t bytes) {
  Call call("cuMemAlloc_v2");
  if (CUresult r = call.needs_context(); r != kSuccess) return call.done(r);
  if (bytes == 0) return call.done(kInvalidValue);
  const int gpu = current_context()->gpu;
  int64_t used = 0;
  for (const auto& [a, allocation] : state().allocations) {
    if (allocation.gpu == gpu) used += static_cast<int64_t>(allocation.bytes);
  }
  if (used + static_cast<int64_t>(bytes) > state().gpus[gpu].memory_bytes) {
    return call.done(kOutOfMemory);
  }
  // Reserved, not committed: pages cost nothing until a copy touches them.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return call.done(kOutOfMemory);
  *address = reinterpret_cast<CUdeviceptr>(p);
  state().allocations[*address] = Allocation{bytes, gpu};
  return call.done(kSuccess);
}

CUresult mem_free(CUdeviceptr address) {
  Call call("cuMemFree_v2");
  if (CUresult r = call.needs_context(); r != kSuccess) return call.done(r);
  auto it = state().allocations.find(address);
  if (it == state().allocations.end()) return call.done(kInvalidValue);
  // cuMemFree synchronizes the device: a capture under way on it, from any thread, breaks.
  for (Stream& s : state().streams) {
    if (s.capture != nullptr && s.context->gpu == it->second.gpu) s.capture_invalidated = true;
  }
  munmap(reinterpret_cast<void*>(address), it->second.bytes);
  state().allocations.erase(it);
  return call.done(kSuccess);
}

CUresult memcpy_htod(CUdeviceptr to, const void* from, size_t bytes, CUstream handle) {
  Call call("cuMemcpyHtoDAsync_v2");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(handle, &stream); r != kSuccess) return call.done(r);
  if (!on_device(to, bytes, stream->context->gpu)) return call.done(kInvalidValue);
  issue(stream, copy_node([=] { std::memcpy(reinterpret_cast<void*>(to), from, bytes); }));
  return call.done(kSuccess);
}

CUresult memcpy_dtoh(void* to, CUdeviceptr from, size_t bytes, CUstream handle) {
  Call call("cuMemcpyDtoHAsync_v2");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(handle, &stream); r != kSuccess) return call.done(r);
  if (!on_device(from, bytes, stream->context->gpu)) return call.done(kInvalidValue);
  issue(stream, copy_node([=] { std::memcpy(to, reinterpret_cast<const void*>(from), bytes); }));
  return call.done(kSuccess);
}

CUresult memcpy_dtod(CUdeviceptr to, CUdeviceptr from, size_t bytes, CUstream handle) {
  Call call("cuMemcpyDtoDAsync_v2");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(handle, &stream); r != kSuccess) return call.done(r);
  const int gpu = stream->context->gpu;
  if (!on_device(to, bytes, gpu) || !on_device(from, bytes, gpu)) return call.done(kInvalidValue);
  issue(stream, copy_node([=] {
          std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), bytes);
        }));
  return call.done(kSuccess);
}

CUresult module_load_data(CUmodule* module, const void* image) {
  Call call("cuModuleLoadData");
  if (CUresult r = call.needs_context(); r != kSuccess) return call.done(r);
  if (image == nullptr) return call.done(kInvalidValue);
  std::map<std::string, EntryPoint> entries;
  if (!read_cubin(image, &entries)) return call.done(kInvalidImage);
  Module& m = state().modules.emplace_back();
  for (const auto& [name, entry] : entries) {
    Function& f = m.functions.emplace_back();
    f.context = current_context();
    f.name = name;
    f.static_shared = entry.static_shared;
    f.argument_sizes = entry.argument_sizes;
    f.max_dynamic_shared = std::max(0, runtime::cuda::kDefaultSharedPerBlock - entry.static_shared);
    state().live_handles.insert(&f);
  }
  state().live_handles.insert(&m);
  *module = reinterpret_cast<CUmodule>(&m);
  return call.done(kSuccess);
}

CUresult module_get_function(CUfunction* function, CUmodule handle, const char* name) {
  Call call("cuModuleGetFunction");
  if (!state().initialized) return call.done(kNotInitialized);
  if (!state().live_handles.contains(handle)) return call.done(kInvalidHandle);
  for (Function& f : reinterpret_cast<Module*>(handle)->functions) {
    if (f.name == name) {
      *function = reinterpret_cast<CUfunction>(&f);
      return call.done(kSuccess);
    }
  }
  return call.done(kNotFound);
}

CUresult function_attribute(int* value, int attribute, CUfunction handle) {
  Call call("cuFuncGetAttribute");
  if (!state().initialized) return call.done(kNotInitialized);
  if (!state().live_handles.contains(handle)) return call.done(kInvalidHandle);
  const Function& f = *reinterpret_cast<Function*>(handle);
  if (attribute == runtime::cuda::kFunctionAttributeSharedSizeBytes) {
    *value = f.static_shared;
  } else if (attribute == runtime::cuda::kFunctionAttributeMaxDynamicSharedSizeBytes) {
    *value = f.max_dynamic_shared;
  } else {
    return call.done(kInvalidValue);
  }
  return call.done(kSuccess);
}

CUresult function_set_attribute(CUfunction handle, int attribute, int value) {
  Call call("cuFuncSetAttribute");
  if (!state().initialized) return call.done(kNotInitialized);
  if (!state().live_handles.contains(handle)) return call.done(kInvalidHandle);
  Function& f = *reinterpret_cast<Function*>(handle);
  if (attribute != runtime::cuda::kFunctionAttributeMaxDynamicSharedSizeBytes) {
    return call.done(kInvalidValue);
  }
  const int most = state().gpus[f.context->gpu].max_shared_per_block_optin - f.static_shared;
  if (value < 0 || value > most) return call.done(kInvalidValue);
  f.max_dynamic_shared = value;
  return call.done(kSuccess);
}

// A launch of `f` as the driver checks it (cuLaunchKernel, or a kernel node's new
// parameters), and as it runs: kSuccess and the kernel node, or the driver's error.
CUresult kernel_node(const Function& f, const unsigned grid[3], const unsigned block[3],
                     unsigned shared, void** params, void** extra, Node* node) {
  const uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
  const bool block_ok =
      threads >= 1 && threads <= 1024 && block[0] <= 1024 && block[1] <= 1024 && block[2] <= 64;
  const bool grid_ok = grid[0] >= 1 && grid[0] <= 0x7fffffffu && grid[1] >= 1 && grid[1] <= 65535 &&
                       grid[2] >= 1 && grid[2] <= 65535;
  if (!block_ok || !grid_ok || (params == nullptr && extra == nullptr)) return kInvalidValue;
  // The driver's check that launches of long rows once failed: static and dynamic shared memory
  // together within 48 KiB, unless the kernel opted in to more.
  if (shared > static_cast<unsigned>(f.max_dynamic_shared)) return kInvalidValue;
  node->kernel = true;
  EmulatedLaunch& launch = node->launch;
  launch.gpu = f.context->gpu;
  launch.function = f.name;
  for (int d = 0; d < 3; ++d) {
    launch.grid[d] = grid[d];
    launch.block[d] = block[d];
  }
  launch.shared_bytes = shared;
  // The arguments are copied now, as the driver copies them: the caller may reuse its own.
  if (params != nullptr) {
    for (size_t i = 0; i < f.argument_sizes.size(); ++i) {
      const auto* bytes = static_cast<const std::byte*>(params[i]);
      launch.arguments.emplace_back(bytes, bytes + f.argument_sizes[i]);
    }
  }
  return kSuccess;
}

CUresult launch_kernel(CUfunction handle, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shared, CUstream stream_handle,
                       void** params, void** extra) {
  Call call("cuLaunchKernel");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(stream_handle, &stream); r != kSuccess) return call.done(r);
  if (!state().live_handles.contains(handle)) return call.done(kInvalidHandle);
  const Function& f = *reinterpret_cast<Function*>(handle);
  if (f.context != stream->context) return call.done(kInvalidHandle);
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  Node node;
  if (CUresult r = kernel_node(f, grid, block, shared, params, extra, &node); r != kSuccess) {
    return call.done(r);
  }
  issue(stream, std::move(node));
  return call.done(kSuccess);
}

CUresult error_string(CUresult code, const char** text) {
  Call call("cuGetErrorString");
  const ErrorText* e = error_text(code);
  // As the driver: an unknown code is an error, and the text null.
  *text = e != nullptr ? e->text : nullptr;
  return call.done(e != nullptr ? kSuccess : kInvalidValue);
}

CUresult stream_begin_capture(CUstream handle, int) {
  Call call("cuStreamBeginCapture_v2");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(handle, &stream); r != kSuccess) return call.done(r);
  if (stream->capture != nullptr) return call.done(kIllegalState);
  stream->capture = new Graph{stream->context, {}, nullptr};
  ++stream->captures;
  return call.done(kSuccess);
}

CUresult stream_end_capture(CUstream handle, CUgraph* graph) {
  Call call("cuStreamEndCapture");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(handle, &stream); r != kSuccess) return call.done(r);
  if (stream->capture == nullptr) return call.done(kIllegalState);
  if (stream->capture_invalidated) {
    delete stream->capture;
    stream->capture = nullptr;
    stream->capture_invalidated = false;
    *graph = nullptr;
    return call.done(kCaptureInvalidated);
  }
  state().graphs.insert(stream->capture);
  *graph = reinterpret_cast<CUgraph>(stream->capture);
  stream->capture = nullptr;
  return call.done(kSuccess);
}

CUresult stream_get_capture_info(CUstream handle, int* status, unsigned long long* id,
                                 CUgraph* graph, const CUgraphNode** dependencies, size_t* count) {
  Call call("cuStreamGetCaptureInfo_v2");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(handle, &stream); r != kSuccess) return call.done(r);
  if (status == nullptr) return call.done(kInvalidValue);
  Graph* capture = stream->capture;
  *status = capture != nullptr ? runtime::cuda::kStreamCaptureStatusActive : 0;
  if (id != nullptr) *id = capture != nullptr ? stream->captures : 0;
  if (graph != nullptr) *graph = reinterpret_cast<CUgraph>(capture);
  // On one stream, the next work follows the last node captured (none before the first).
  stream->dependencies.clear();
  if (capture != nullptr && !capture->nodes.empty()) {
    stream->dependencies.push_back(reinterpret_cast<CUgraphNode>(&capture->nodes.back()));
  }
  if (dependencies != nullptr) *dependencies = stream->dependencies.data();
  if (count != nullptr) *count = stream->dependencies.size();
  return call.done(kSuccess);
}

CUresult graph_instantiate(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  Call call("cuGraphInstantiateWithFlags");
  auto* g = reinterpret_cast<Graph*>(graph);
  if (!state().graphs.contains(g)) return call.done(kInvalidValue);
  auto* e = new Graph{g->context, g->nodes, g};
  state().graphs.insert(e);
  *exec = reinterpret_cast<CUgraphExec>(e);
  return call.done(kSuccess);
}

CUresult graph_launch(CUgraphExec exec, CUstream handle) {
  Call call("cuGraphLaunch");
  Stream* stream = nullptr;
  if (CUresult r = call.needs_stream(handle, &stream); r != kSuccess) return call.done(r);
  auto* g = reinterpret_cast<Graph*>(exec);
  if (!state().graphs.contains(g) || g->context != stream->context) {
    return call.done(kInvalidValue);
  }
  for (const Node& node : g->nodes) issue(stream, node);
  return call.done(kSuccess);
}

// As the driver: the node is named by its handle in the graph the executable graph was made
// from, which must still exist, and the new launch is checked as cuLaunchKernel checks one.
CUresult graph_exec_kernel_node_set_params(CUgraphExec exec, CUgraphNode handle,
                                           const KernelNodeParams* params) {
  Call call("cuGraphExecKernelNodeSetParams_v2");
  if (!state().initialized) return call.done(kNotInitialized);
  auto* e = reinterpret_cast<Graph*>(exec);
  if (!state().graphs.contains(e) || e->source == nullptr || params == nullptr ||
      !state().graphs.contains(const_cast<Graph*>(e->source))) {
    return call.done(kInvalidValue);
  }
  size_t i = 0;
  while (i < e->source->nodes.size() &&
         reinterpret_cast<CUgraphNode>(const_cast<Node*>(&e->source->nodes[i])) != handle) {
    ++i;
  }
  if (i == e->source->nodes.size() || !e->nodes[i].kernel) return call.done(kInvalidValue);
  if (!state().live_handles.contains(params->function)) return call.done(kInvalidHandle);
  const Function& f = *reinterpret_cast<Function*>(params->function);
  if (f.context != e->context) return call.done(kInvalidValue);
  Node node;
  if (CUresult r = kernel_node(f, params->grid, params->block, params->shared_bytes,
                               params->kernel_params, params->extra, &node);
      r != kSuccess) {
    return call.done(r);
  }
  e->nodes[i] = std::move(node);
  return call.done(kSuccess);
}

CUresult destroy_graph(const char* name, void* graph) {
  Call call(name);
  auto* g = static_cast<Graph*>(graph);
  if (!state().graphs.erase(g)) return call.done(kInvalidValue);
  delete g;
  return call.done(kSuccess);
}

CUresult graph_destroy(CUgraph graph) { return destroy_graph("cuGraphDestroy", graph); }
CUresult graph_exec_destroy(CUgraphExec exec) { return destroy_graph("cuGraphExecDestroy", exec); }

}  // namespace

EmulatedDriver& EmulatedDriver::get() {
  static EmulatedDriver* driver = new EmulatedDriver();
  return *driver;
}

EmulatedDriver::EmulatedDriver() {
  api_.init = init;
  api_.device_count = device_count;
  api_.device_get = device_get;
  api_.device_name = device_name;
  api_.device_memory = device_memory;
  api_.device_attribute = device_attribute;
  api_.primary_ctx_retain = primary_ctx_retain;
  api_.ctx_set_current = ctx_set_current;
  api_.ctx_push_current = ctx_push_current;
  api_.ctx_pop_current = ctx_pop_current;
  api_.stream_create = stream_create;
  api_.stream_synchronize = stream_synchronize;
  api_.stream_query = stream_query;
  api_.mem_alloc = mem_alloc;
  api_.mem_free = mem_free;
  api_.memcpy_htod_async = memcpy_htod;
  api_.memcpy_dtoh_async = memcpy_dtoh;
  api_.memcpy_dtod_async = memcpy_dtod;
  api_.module_load_data = module_load_data;
  api_.module_get_function = module_get_function;
  api_.function_attribute = function_attribute;
  api_.function_set_attribute = function_set_attribute;
  api_.launch_kernel = launch_kernel;
  api_.error_string = error_string;
  api_.stream_begin_capture = stream_begin_capture;
  api_.stream_end_capture = stream_end_capture;
  api_.graph_instantiate = graph_instantiate;
  api_.graph_launch = graph_launch;
  api_.graph_destroy = graph_destroy;
  api_.graph_exec_destroy = graph_exec_destroy;
  api_.stream_get_capture_info = stream_get_capture_info;
  api_.graph_exec_kernel_node_set_params = graph_exec_kernel_node_set_params;
}

EmulatedGpu& EmulatedDriver::gpu(int index) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().gpus.at(index);
}

void EmulatedDriver::set_before_call(std::function<void(std::string_view)> hook) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().before_call = std::move(hook);
}

void EmulatedDriver::reset() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().gpus.fill(EmulatedGpu{});
  state().before_call = nullptr;
  state().faulted.fill(false);
  state().failures.clear();
  state().launches.clear();
  state().calls.clear();
}

std::vector<std::string> EmulatedDriver::failures() const {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().failures;
}

std::vector<EmulatedLaunch> EmulatedDriver::launches() const {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().launches;
}

int64_t EmulatedDriver::calls(std::string_view call) const {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().calls.find(call);
  return it == state().calls.end() ? 0 : it->second;
}

int64_t EmulatedDriver::live_allocations() const {
  std::lock_guard<std::mutex> lock(state().mutex);
  return static_cast<int64_t>(state().allocations.size());
}

}  // namespace kiln::testing
