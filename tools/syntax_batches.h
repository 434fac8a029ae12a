// NVRTC's front end over many modules at once, for `kiln compile-cuda --check syntax`.
#ifndef KILN_TOOLS_SYNTAX_BATCHES_H_
#define KILN_TOOLS_SYNTAX_BATCHES_H_

#include <vector>

#include "absl/status/status.h"
#include "runtime/cuda/parallel_compile.h"  // KernelSource

namespace kiln::tools {

// check_device_syntax of every module for every architecture: the result for kernels[i % n]
// and archs[i / n] at index i, n = kernels.size(). Generated modules share one preamble (the
// op functors and device functions, most of each module), which the front end would parse again for
// each; here modules with the same preamble are checked in batches, as one program of the
// preamble followed by each module's own code in a namespace of its own (its extern "C"
// entries become C++ functions there, so equal entry names do not clash). A batch that fails
// is checked module by module, so a failure names its module with the module's own log.
// On all cores.
std::vector<absl::Status> check_syntax_in_batches(
    const std::vector<runtime::cuda::KernelSource>& kernels, const std::vector<int>& archs);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_SYNTAX_BATCHES_H_
