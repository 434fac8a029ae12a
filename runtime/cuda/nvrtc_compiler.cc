#include "runtime/cuda/nvrtc_compiler.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::runtime::cuda {
namespace {

// What nvrtc_options() says, one option each (nvrtc_compiler.h says why --fmad=false).
constexpr const char* kOptions[] = {"--std=c++17", "-default-device", "--fmad=false"};

// The few NVRTC entry points Kiln uses, with the C signatures of nvrtc.h (no CUDA headers
// needed to build Kiln).
using nvrtcResult = int;
using nvrtcProgram = void*;
struct Nvrtc {
  nvrtcResult (*version)(int*, int*);
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                        const char* const*);
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*log_size)(nvrtcProgram, size_t*);
  nvrtcResult (*log)(nvrtcProgram, char*);
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*);
  nvrtcResult (*cubin)(nvrtcProgram, char*);
  nvrtcResult (*ptx_size)(nvrtcProgram, size_t*);
  nvrtcResult (*ptx)(nvrtcProgram, char*);
  nvrtcResult (*destroy)(nvrtcProgram*);
  const char* (*error_string)(nvrtcResult);
};

struct Loaded {
  absl::Status status;
  Nvrtc api{};
};

// NVRTC opens libnvrtc-builtins for every compile and closes it after. Kept open, it is
// loaded once instead of once per kernel, and threads that compiled never keep thread-local
// storage of an unmapped library (which crashed LeakSanitizer's exit scan in CI).
void keep_builtins_loaded(const Nvrtc& api) {
  int major = 0, minor = 0;
  if (api.version(&major, &minor) != 0) return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(api.version), &info) == 0 || info.dli_fname == nullptr) return;
  const std::string path = info.dli_fname;
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  (void)dlopen(absl::StrCat(dir, "libnvrtc-builtins.so.", major, ".", minor).c_str(),
               RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

const Loaded& load() {
  static const Loaded loaded = [] {
    Loaded l;
    void* lib = nullptr;
    std::string tried;
    for (const char* name :
         {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
      absl::StrAppend(&tried, tried.empty() ? "" : ", ", name);
    }
    if (lib == nullptr) {
      l.status = absl::UnavailableError(absl::StrCat("NVRTC not found (tried ", tried, ")"));
      return l;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (p == nullptr && l.status.ok()) {
        l.status = absl::UnavailableError(absl::StrCat("NVRTC lacks ", name));
      }
      return p;
    };
    l.api.version = reinterpret_cast<decltype(l.api.version)>(sym("nvrtcVersion"));
    l.api.create = reinterpret_cast<decltype(l.api.create)>(sym("nvrtcCreateProgram"));
    l.api.compile = reinterpret_cast<decltype(l.api.compile)>(sym("nvrtcCompileProgram"));
    l.api.log_size = reinterpret_cast<decltype(l.api.log_size)>(sym("nvrtcGetProgramLogSize"));
    l.api.log = reinterpret_cast<decltype(l.api.log)>(sym("nvrtcGetProgramLog"));
    l.api.cubin_size = reinterpret_cast<decltype(l.api.cubin_size)>(sym("nvrtcGetCUBINSize"));
    l.api.cubin = reinterpret_cast<decltype(l.api.cubin)>(sym("nvrtcGetCUBIN"));
    l.api.ptx_size = reinterpret_cast<decltype(l.api.ptx_size)>(sym("nvrtcGetPTXSize"));
    l.api.ptx = reinterpret_cast<decltype(l.api.ptx)>(sym("nvrtcGetPTX"));
    l.api.destroy = reinterpret_cast<decltype(l.api.destroy)>(sym("nvrtcDestroyProgram"));
    l.api.error_string = reinterpret_cast<decltype(l.api.error_string)>(sym("nvrtcGetErrorString"));
    if (l.status.ok()) keep_builtins_loaded(l.api);
    return l;
  }();
  return loaded;
}

absl::Status check(const Nvrtc& api, nvrtcResult r, const char* call, const std::string& name) {
  if (r == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed for ", name, ": ", api.error_string(r)));
}

}  // namespace

absl::Status nvrtc_available() { return load().status; }

absl::StatusOr<std::string> nvrtc_version() {
  const Loaded& l = load();
  if (!l.status.ok()) return l.status;
  int major = 0, minor = 0;
  if (absl::Status s = check(l.api, l.api.version(&major, &minor), "nvrtcVersion", "NVRTC");
      !s.ok()) {
    return s;
  }
  return absl::StrCat(major, ".", minor);
}

namespace {

// What one NVRTC run produces.
enum class Output { kCubin, kPtx, kSyntaxCheck };

// Compiles for sm_<arch> (a cubin) or compute_<arch> (PTX, or the front end's check alone) and
// returns that output (empty for the check); with `ptxas_log`, also asks ptxas for its
// resource report and keeps NVRTC's log there.
absl::StatusOr<std::string> compile(const std::string& source, const std::string& name, int arch,
                                    Output output, std::string* ptxas_log = nullptr) {
  const bool ptx = output != Output::kCubin;
  const Loaded& l = load();
  if (!l.status.ok()) return l.status;
  const Nvrtc& api = l.api;
  nvrtcProgram prog = nullptr;
  const std::string file = name + ".cu";
  if (absl::Status s =
          check(api, api.create(&prog, source.c_str(), file.c_str(), 0, nullptr, nullptr),
                "nvrtcCreateProgram", name);
      !s.ok()) {
    return s;
  }
  const std::string arch_option =
      absl::StrCat("--gpu-architecture=", ptx ? "compute_" : "sm_", arch);
  std::vector<const char*> options = {arch_option.c_str()};
  for (const char* option : kOptions) options.push_back(option);
  // -Xptxas -v only adds the report to the log: the cubin is the one compile_to_cubin gives.
  if (ptxas_log != nullptr) options.insert(options.end(), {"-Xptxas", "-v"});
  if (output == Output::kSyntaxCheck) options.push_back("-fdevice-syntax-only");
  const nvrtcResult compiled = api.compile(prog, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  api.log_size(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) api.log(prog, log.data());
  if (ptxas_log != nullptr) *ptxas_log = log;
  absl::StatusOr<std::string> result;
  if (compiled != 0) {
    result =
        absl::InvalidArgumentError(absl::StrCat("NVRTC could not compile ", name, " for sm_", arch,
                                                ": ", api.error_string(compiled), "\n", log));
  } else if (output == Output::kSyntaxCheck) {
    result = std::string();
  } else {
    size_t size = 0;
    (ptx ? api.ptx_size : api.cubin_size)(prog, &size);
    std::string out(size, '\0');
    if (absl::Status s = check(api, (ptx ? api.ptx : api.cubin)(prog, out.data()),
                               ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", name);
        !s.ok()) {
      result = s;
    } else {
      result = std::move(out);
    }
  }
  api.destroy(&prog);
  return result;
}

}  // namespace

std::string nvrtc_options() {
  std::string joined;
  for (const char* option : kOptions) absl::StrAppend(&joined, joined.empty() ? "" : " ", option);
  return joined;
}

absl::StatusOr<std::string> compile_to_cubin(const std::string& source, const std::string& name,
                                             int arch) {
  return compile(source, name, arch, Output::kCubin);
}

absl::StatusOr<std::string> compile_to_ptx(const std::string& source, const std::string& name,
                                           int arch) {
  return compile(source, name, arch, Output::kPtx);
}

absl::Status check_device_syntax(const std::string& source, const std::string& name, int arch) {
  return compile(source, name, arch, Output::kSyntaxCheck).status();
}

absl::StatusOr<CubinWithPtxasLog> compile_to_cubin_with_ptxas_log(const std::string& source,
                                                                  const std::string& name,
                                                                  int arch) {
  CubinWithPtxasLog result;
  absl::StatusOr<std::string> cubin = compile(source, name, arch, Output::kCubin, &result.log);
  if (!cubin.ok()) return cubin.status();
  result.cubin = *std::move(cubin);
  return result;
}

}  // namespace kiln::runtime::cuda
