// The compiled functions of Kernel IR programs (compiled_expression.h's
// compiled_kernel_function), and when their compiles happen: no launch waits for a C++
// compiler unless KILN_CPU_JIT=sync (host_compiler.h).
//
// In the default mode a program's first launch only looks in the disk cache: a library built
// earlier (by this machine, in any process) loads at once; otherwise the tile evaluator runs
// the kernel, the same bits. Its second launch queues the compile on a background thread, and
// the evaluator keeps running it until the library is loaded; from then on every launch gets
// the compiled loop. So a program that runs a kernel once never pays for a compile, not even
// on another core. A compile that fails or times out is said once on stderr and leaves the
// evaluator in charge of that kernel.
#ifndef KILN_RUNTIME_CPU_COMPILED_KERNEL_CACHE_H_
#define KILN_RUNTIME_CPU_COMPILED_KERNEL_CACHE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "jit/fusion/kernel_ir.h"

namespace kiln::runtime::cpu {

// Returns once every queued compile has finished (loaded or failed); for tests and for
// programs that want their loops before timing them.
void wait_for_background_compiles();

// Compiles queued on the background thread so far, in this process.
int64_t background_compiles_queued();

// The disk-cache keys (host_compiler.h) of the compiled loops this process has loaded for
// `program`: what a bundle copies for it (docs/bundles.md).
std::vector<std::string> compiled_library_keys(const jit::KernelProgram& program);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_COMPILED_KERNEL_CACHE_H_
