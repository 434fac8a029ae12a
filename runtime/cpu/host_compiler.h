// Compiles generated C++ into machine code for the CPU Kiln runs on, with the machine's own
// C++ compiler (the CPU counterpart of NVRTC): the source goes to a file, the compiler
// builds a shared library from it, and the library is loaded with dlopen.
//
// Compiled libraries are kept across processes under <cache dir>/cpu/ (base/cache_dir.h),
// named by a checksum of the key (prelude, source, compiler, flags), next to the source they
// came from; a key is compiled once per machine and loaded once per process. A library is only
// renamed into place once the compiler succeeded, so a failed or interrupted build never
// leaves a file that a later process would load. The cache is private (base/cache_dir.h):
// a library is loaded only when it and the folders above it, up to the cache root, belong to
// this user and no one else can write them, and it is loaded through the descriptor that was
// checked. Otherwise, or with no cache folder at all, compiled_function fails and the caller
// runs the kernel another way.
//
// A compiler that runs longer than KILN_CPU_JIT_TIMEOUT seconds (default 120) is killed,
// with every process it started. A process that exits while a compiler runs kills it and
// removes its temporary files, so that nothing half-written is left in the cache.
//
// Environment: KILN_CPU_JIT=0 turns compiled CPU kernels off (the tile evaluator runs
// everything), KILN_CPU_JIT=sync makes a launch wait for its kernel's compile instead of
// running the evaluator meanwhile (compiled_expression.h); KILN_CXX names the compiler
// (default: c++ on the PATH).
#ifndef KILN_RUNTIME_CPU_HOST_COMPILER_H_
#define KILN_RUNTIME_CPU_HOST_COMPILER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::runtime::cpu {

// When compiled CPU kernels are built (KILN_CPU_JIT).
enum class HostCompileMode {
  kOff,         // "0": never; the tile evaluator runs every kernel
  kBackground,  // the default: on a background thread, the evaluator running the kernel
                // until its loop is ready (compiled_expression.h)
  kWait,        // "sync": while the launch waits, as benchmarks of compiled loops want
};
HostCompileMode host_compile_mode();
// Overrides KILN_CPU_JIT's mode (tests); nullopt restores it.
void set_host_compile_mode(std::optional<HostCompileMode> mode);

// Whether compiled CPU kernels may be used (the mode is not kOff).
bool host_compiler_enabled();

// The compiler flags every compiled kernel is built with, the instruction set among them
// (chosen from the CPU present, e.g. -march=x86-64-v3 where it has AVX2 and FMA). Part of
// the cache key.
const std::string& host_compiler_flags();

// The address of extern "C" function `symbol` in `source` compiled for this machine, with
// `prelude` (a header's text, shared by many sources; may be empty) included before it. The
// prelude is written once to <cache dir>/cpu/prelude_<checksum>.h and precompiled beside it,
// so each source only pays for its own lines. An error names the compiler, its command and
// its first lines of output; a source that once failed in this process is not compiled again.
// With `build` false only a library the cache already holds is loaded: a NotFound status
// when it holds none (and nothing is remembered, so a later call may build it).
absl::StatusOr<void*> compiled_function(const std::string& prelude, const std::string& source,
                                        const std::string& symbol, bool build = true);

// What a compiled library is built with: the compiler's command and its flags. A library
// runs where both are the same (bundles compare it: docs/bundles.md).
std::string host_compiler_target();

// The cache key compiled_function files `source` with `prelude` under: the compiler, its
// flags (the instruction set among them), the prelude and the source.
std::string compiled_function_key(const std::string& prelude, const std::string& source);

// Bundles (docs/bundles.md) carry compiled libraries from one cache to another. The library
// the cache holds for `key`, as bytes (NotFound when it holds none for exactly that key).
absl::StatusOr<std::string> read_cached_library(const std::string& key);
// Puts `library` into the cache as the library of `key`, as a compile would: the library is
// renamed into place whole, then its key written beside it. A library already there for the
// key is kept.
absl::Status install_cached_library(const std::string& key, const std::string& library);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_HOST_COMPILER_H_
