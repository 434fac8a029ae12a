// Generated CUDA modules compiled by the host compiler against cuda_emulation.h into one
// shared library, and launched on the host with the same packed Params a GPU launch gets.
#ifndef KILN_TESTS_CUDA_EMULATION_EMULATED_KERNELS_H_
#define KILN_TESTS_CUDA_EMULATION_EMULATED_KERNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::testing {

struct EmulatedModule {
  std::string source;  // a module as render_cuda gives it
  std::string entry;   // its kernel name (entries are <entry>_i32 and <entry>_i64)
};

// What the library's kernels have done since it was built, summed over every launch: so a
// test can tell that a path it means to cover ran.
struct EmulatedCounters {
  int64_t cp_async_copies = 0;  // cp.async copies issued (16 bytes each)
  int64_t ldmatrix_loads = 0;   // ldmatrix instructions, counted per lane
};

class EmulatedKernels {
 public:
  // Compiles every module (host C++, one library) in `dir`; the error holds the compiler's log.
  static absl::StatusOr<EmulatedKernels> build(const std::vector<EmulatedModule>& modules,
                                               const std::string& dir);

  // Runs module `index`'s 32- or 64-bit entry with (Params, Split) over grid_x * grid_y
  // blocks of `block` threads, each with `shared_bytes` of dynamic shared memory.
  void launch(int index, bool wide, const void* params, const void* split, int64_t grid_x,
              int64_t grid_y, int block, int shared_bytes) const;

  EmulatedCounters counters() const;

 private:
  using LaunchFn = int (*)(int, int, const void*, const void*, long long, long long, int, unsigned);
  std::vector<LaunchFn> parts_;  // one dispatcher per translation unit
  size_t per_part_ = 1;          // modules per unit
  using CountersFn = void (*)(long long*);
  CountersFn counters_ = nullptr;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_CUDA_EMULATION_EMULATED_KERNELS_H_
