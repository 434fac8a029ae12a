// Opening an optional CUDA library (NCCL, cuBLASLt) with dlopen: the first file of a list
// of candidates that loads and has every entry point Kiln uses.
//
// Internal to runtime/cuda.
#ifndef KILN_RUNTIME_CUDA_LIBRARY_LOADER_H_
#define KILN_RUNTIME_CUDA_LIBRARY_LOADER_H_

#include <dlfcn.h>

#include <optional>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

// Opens each of `candidates` in turn; resolve(handle, name, api) fills a fresh `Api` (a
// struct with `absl::Status status` and `std::string library`) and sets its status where an
// entry point is missing. Returns the first api whose status stays ok, with `library` set to
// its file, which stays open for the process's life. A file that does not load, or loads
// but is not a usable library of that name (too old, or another library), is closed and
// appended to `passed_over` with the reason (dlerror's text, or the missing entry point);
// nullopt when no file is usable.
template <class Api, class Resolve>
std::optional<Api> open_first_usable(const std::vector<std::string>& candidates, Resolve&& resolve,
                                     std::vector<std::string>& passed_over) {
  for (const std::string& name : candidates) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      passed_over.push_back(why != nullptr ? why : name);
      continue;
    }
    Api api;
    resolve(lib, name, api);
    if (api.status.ok()) {
      api.library = name;
      return api;
    }
    passed_over.push_back(std::string(api.status.message()));
    dlclose(lib);
  }
  return std::nullopt;
}

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_LIBRARY_LOADER_H_
