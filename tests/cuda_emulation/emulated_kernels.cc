#include "tests/cuda_emulation/emulated_kernels.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace kiln::testing {
namespace {

// Module i becomes namespace b<build>_m<i>; its entries lose `extern "C"` (two modules may
// share a kernel name) and the unit's C dispatcher calls them by index. The build number
// keeps two libraries in one process apart: a kernel's `__shared__` arrays are static locals
// of a template, which the dynamic linker would otherwise unify across libraries.
std::string translation_unit(const std::vector<EmulatedModule>& modules, size_t begin, size_t end,
                             size_t part, int build) {
  std::string tu =
      "#define KILN_CUDA_HOST_EMULATION 1\n#include \"tests/cuda_emulation/cuda_emulation.h\"\n";
  for (size_t i = begin; i < end; ++i) {
    absl::StrAppend(&tu, "namespace b", build, "_m", i, " {\n",
                    absl::StrReplaceAll(modules[i].source, {{"extern \"C\" __global__", ""}}),
                    "\n}  // namespace\n");
  }
  absl::StrAppend(
      &tu, "extern \"C\" int kiln_emulated_launch_", part,
      "(int m, int wide, const void* p, const void* s, long long gx, long long gy, int block, "
      "unsigned shared) {\n"
      "  switch (m) {\n");
  for (size_t i = begin; i < end; ++i) {
    const std::string e = modules[i].entry;
    const std::string m = absl::StrCat("b", build, "_m", i, "::");
    const std::string args = absl::StrCat("(*(const ", m, "Params*)p, *(const ", m, "Split*)s)");
    absl::StrAppend(&tu, "    case ", i, ": kiln_emulation::launch(gx, gy, block, shared, [&] { ",
                    "if (wide) ", m, e, "_i64", args, "; else ", m, e, "_i32", args,
                    "; }); return 0;\n");
  }
  absl::StrAppend(&tu, "  }\n  return 1;\n}\n");
  // The library's counters (one set: the units share the emulation's inline variables).
  absl::StrAppend(&tu, "extern \"C\" void kiln_emulated_counters_", part,
                  "(long long* out) {\n  out[0] = kiln_emulation::counters.cp_async_copies;\n"
                  "  out[1] = kiln_emulation::counters.ldmatrix_loads;\n}\n");
  return tu;
}

}  // namespace

absl::StatusOr<EmulatedKernels> EmulatedKernels::build(const std::vector<EmulatedModule>& modules,
                                                       const std::string& dir) {
  // The modules are split over a few translation units compiled side by side, each with a
  // dispatcher for its own modules.
  static std::atomic<int> builds{0};
  const int build = builds++;
  const size_t parts = std::max(1u, std::thread::hardware_concurrency());
  const size_t per = std::max<size_t>(1, (modules.size() + parts - 1) / parts);
  std::vector<std::string> objects;
  std::vector<std::thread> compilers;
  std::vector<int> results(parts, 0);
  auto compile = [&](size_t part, const std::string& tu) {
    const std::string source = absl::StrCat(dir, "/emulated_", part, ".cc");
    const std::string object = absl::StrCat(dir, "/emulated_", part, ".o");
    std::ofstream(source) << tu;
    const std::string command = absl::StrCat(
        "c++ -std=c++20 -O1 -fPIC -fno-gnu-unique -Werror=uninitialized "
        "-Werror=maybe-uninitialized -c ",
        KILN_EMULATION_FLAGS, " -I", KILN_SOURCE_DIR, " -I", KILN_SOURCE_DIR, "/include ", source,
        " -o ", object, " > ", dir, "/emulated_", part, ".log 2>&1");
    results[part] = std::system(command.c_str());
  };
  for (size_t part = 0; part < parts; ++part) {
    const size_t begin = std::min(modules.size(), part * per);
    const size_t end = std::min(modules.size(), begin + per);
    objects.push_back(absl::StrCat(dir, "/emulated_", part, ".o"));
    compilers.emplace_back(compile, part, translation_unit(modules, begin, end, part, build));
  }
  for (std::thread& t : compilers) t.join();
  for (size_t part = 0; part < parts; ++part) {
    if (results[part] == 0) continue;
    std::ifstream log(absl::StrCat(dir, "/emulated_", part, ".log"));
    std::stringstream text;
    text << log.rdbuf();
    return absl::InternalError(absl::StrCat("host compile of emulated kernels failed (", dir,
                                            "/emulated_", part, ".cc):\n",
                                            text.str().substr(0, 4000)));
  }
  const std::string library = dir + "/emulated.so";
  std::string link = absl::StrCat("c++ -shared ", KILN_EMULATION_FLAGS, " -o ", library);
  for (const std::string& o : objects) absl::StrAppend(&link, " ", o);
  if (std::system(link.c_str()) != 0) return absl::InternalError("linking emulated kernels failed");
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return absl::InternalError(absl::StrCat("dlopen: ", dlerror()));
  EmulatedKernels k;
  k.per_part_ = per;
  for (size_t part = 0; part < parts; ++part) {
    const std::string name = absl::StrCat("kiln_emulated_launch_", part);
    k.parts_.push_back(reinterpret_cast<LaunchFn>(dlsym(handle, name.c_str())));
    if (k.parts_.back() == nullptr) return absl::InternalError("missing " + name);
  }
  k.counters_ = reinterpret_cast<CountersFn>(dlsym(handle, "kiln_emulated_counters_0"));
  if (k.counters_ == nullptr) return absl::InternalError("missing kiln_emulated_counters_0");
  return k;
}

void EmulatedKernels::launch(int index, bool wide, const void* params, const void* split,
                             int64_t grid_x, int64_t grid_y, int block, int shared_bytes) const {
  parts_.at(index / per_part_)(index, wide ? 1 : 0, params, split, static_cast<long long>(grid_x),
                               static_cast<long long>(grid_y), block,
                               static_cast<unsigned>(shared_bytes));
}

EmulatedCounters EmulatedKernels::counters() const {
  long long out[2] = {0, 0};
  counters_(out);
  return {out[0], out[1]};
}

}  // namespace kiln::testing
