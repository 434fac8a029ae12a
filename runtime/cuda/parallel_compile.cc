#include "runtime/cuda/parallel_compile.h"

#include "base/thread_pool.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace kiln::runtime::cuda {

std::vector<absl::StatusOr<CubinCache::Result>> compile_in_parallel(
    CubinCache& cache, const std::vector<KernelSource>& kernels, int arch) {
  static const std::string version = nvrtc_version().value_or("unknown");
  std::vector<absl::StatusOr<CubinCache::Result>> results(kernels.size(),
                                                          absl::UnknownError("not compiled"));
  // Grain 1: every kernel may go to its own core (one compile dwarfs any scheduling cost).
  base::parallel_for(static_cast<int64_t>(kernels.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const KernelSource& k = kernels[i];
      results[i] = cache.get(cubin_key(k.source, arch, version, nvrtc_options()),
                             [&] { return compile_to_cubin(k.source, k.name, arch); });
    }
  });
  return results;
}

}  // namespace kiln::runtime::cuda
