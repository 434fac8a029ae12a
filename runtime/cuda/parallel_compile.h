// Compiling the kernels of one plan at once. NVRTC costs 65-140 ms per small kernel and is
// single-threaded per call, so a plan of ten new kernels compiled one after another would
// stall the first sync for a second; compiled side by side on every core it costs about as
// much as its slowest kernel. NVRTC is thread-safe; the cubin cache is shared.
#ifndef KILN_RUNTIME_CUDA_PARALLEL_COMPILE_H_
#define KILN_RUNTIME_CUDA_PARALLEL_COMPILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/cubin_cache.h"

namespace kiln::runtime::cuda {

struct KernelSource {
  std::string name;    // the module's kernel name (for NVRTC's log)
  std::string source;  // the whole module
};

// The cubin of every kernel for sm_<arch>, in order: each from `cache` (memory, then disk),
// else compiled with NVRTC, all the kernels that need compiling on the CPU worker threads
// at once. A kernel that fails to compile gives its error without affecting the others.
std::vector<absl::StatusOr<CubinCache::Result>> compile_in_parallel(
    CubinCache& cache, const std::vector<KernelSource>& kernels, int arch);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_PARALLEL_COMPILE_H_
