// Linked into every benchmark: a benchmark times compiled CPU loops from its first
// iteration, so unless the environment says otherwise, a launch waits for its kernel's
// compile (KILN_CPU_JIT=sync) instead of running the tile evaluator while the loop compiles
// in the background (runtime/cpu/compiled_kernel_cache.h).
#include <cstdlib>

namespace {

// Set before main, so before Kiln first reads KILN_CPU_JIT.
const bool kCompileInForeground = [] {
  setenv("KILN_CPU_JIT", "sync", /*overwrite=*/0);
  return true;
}();

}  // namespace
