// Loading LAPACK with dlopen and resolving the routines kiln::linalg runs (lapack.h).
#include "jit/api/lapack.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/thread_pool.h"
#include "kiln/error.h"

namespace kiln::linalg::lapack {
namespace {

constexpr char kHowToInstall[] =
    "install OpenBLAS (Debian's libopenblas0) or the reference LAPACK (liblapack3), or set "
    "KILN_LAPACK_LIBRARY to a LAPACK library's path";

std::mutex load_mutex;
Library* loaded = nullptr;  // set once, never freed: the routines live as long as the process

// The libraries to try, in order.
std::vector<std::string> candidates() {
  if (const char* path = std::getenv("KILN_LAPACK_LIBRARY"); path != nullptr && *path != '\0') {
    return {path};
  }
  return {"libopenblas.so.0", "liblapack.so.3"};
}

template <class F>
void resolve(F& function, void* handle, const std::string& path, const char* op,
             const char* symbol) {
  dlerror();
  function = reinterpret_cast<F>(dlsym(handle, symbol));
  if (function == nullptr) {
    throw Error(absl::StrCat("[linalg.", op, "] ", path, " was loaded but has no LAPACK routine ",
                             symbol, ": ", kHowToInstall));
  }
}

template <class S>
void resolve_all(Routines<S>& r, void* handle, const std::string& path, const char* op,
                 char prefix) {
  auto name = [prefix](const char* routine) {
    return absl::StrCat(std::string(1, prefix), routine);
  };
  resolve(r.getrf, handle, path, op, name("getrf_").c_str());
  resolve(r.getrs, handle, path, op, name("getrs_").c_str());
  resolve(r.potrf, handle, path, op, name("potrf_").c_str());
  resolve(r.geqrf, handle, path, op, name("geqrf_").c_str());
  resolve(r.orgqr, handle, path, op, name("orgqr_").c_str());
  resolve(r.syevd, handle, path, op, name("syevd_").c_str());
}

}  // namespace

Library open_library(const char* op, const std::vector<std::string>& paths) {
  std::vector<std::string> tried;
  for (const std::string& path : paths) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried.push_back(absl::StrCat(path, " (", why != nullptr ? why : "not found", ")"));
      continue;
    }
    Library library{path, {}, {}};
    try {
      resolve_all(library.single, handle, path, op, 's');
      resolve_all(library.double_precision, handle, path, op, 'd');
    } catch (...) {
      dlclose(handle);
      throw;
    }
    return library;  // the handle stays open: the routines are used for the process's life
  }
  throw Error(absl::StrCat("[linalg.", op, "] needs LAPACK, and none could be loaded: tried ",
                           absl::StrJoin(tried, ", "), "; ", kHowToInstall));
}

void load(const char* op) {
  std::lock_guard<std::mutex> lock(load_mutex);
  if (loaded != nullptr) return;
  loaded = new Library(open_library(op, candidates()));
  // OpenBLAS starts a thread per core of its own; it gets the CPU device's share instead.
  if (void* handle = dlopen(loaded->path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(handle, "openblas_set_num_threads"))) {
      set(base::worker_count());
    }
    dlclose(handle);  // drops the reference RTLD_NOLOAD took; open_library's stays
  }
}

std::optional<SyevdWorkspace> syevd_workspace(int n, double queried_work, int queried_iwork) {
  const int64_t order = n;
  const int64_t work = std::max({int64_t{1}, static_cast<int64_t>(std::ceil(queried_work)),
                                 1 + 6 * order + 2 * order * order});
  const int64_t iwork = std::max({int64_t{1}, int64_t{queried_iwork}, 3 + 5 * order});
  constexpr int64_t kLargest = std::numeric_limits<int>::max();
  if (work > kLargest || iwork > kLargest) return std::nullopt;
  return SyevdWorkspace{static_cast<int>(work), static_cast<int>(iwork)};
}

const std::string& library_path() {
  static const std::string none;
  std::lock_guard<std::mutex> lock(load_mutex);
  return loaded != nullptr ? loaded->path : none;
}

template <>
const Routines<float>& routines<float>() {
  return loaded->single;
}

template <>
const Routines<double>& routines<double>() {
  return loaded->double_precision;
}

}  // namespace kiln::linalg::lapack
