// NVRTC, opened with dlopen on first use (so Kiln starts where no CUDA toolkit exists), and
// compiling CUDA C++ source to a cubin for one GPU architecture.
#ifndef KILN_RUNTIME_CUDA_NVRTC_COMPILER_H_
#define KILN_RUNTIME_CUDA_NVRTC_COMPILER_H_

#include <string>

#include "absl/status/statusor.h"

namespace kiln::runtime::cuda {

// Whether NVRTC could be loaded; the reason when not.
absl::Status nvrtc_available();
// "13.0" for the loaded NVRTC.
absl::StatusOr<std::string> nvrtc_version();

// The options every kernel is compiled with besides its architecture, as one string (part of
// the cubin cache's key). They include --fmad=false: NVRTC would otherwise contract a
// multiply and an add of two ops into one fused multiply-add, which rounds once, so a fused
// chain would differ from the same ops run one kernel each ("fusion never changes a result",
// docs/contracts.md). A kernel that wants an FMA (a matmul's accumulation) writes fmaf.
std::string nvrtc_options();

// Compiles `source` (a kernel module named `name`) to a cubin for sm_<arch> (e.g. 80, 90).
// On a compile error the message holds NVRTC's log.
absl::StatusOr<std::string> compile_to_cubin(const std::string& source, const std::string& name,
                                             int arch);

// The PTX of `source` for compute_<arch>: readable, for tests that check what a kernel
// compiles to (vector loads, tensor-core instructions).
absl::StatusOr<std::string> compile_to_ptx(const std::string& source, const std::string& name,
                                           int arch);

// NVRTC's front end alone (-fdevice-syntax-only) for compute_<arch>: parses and type-checks
// `source` and evaluates its static_asserts, but generates no code. About a seventh of a
// cubin's compile time, for tests of what a kernel declares (its Params layout).
absl::Status check_device_syntax(const std::string& source, const std::string& name, int arch);

// compile_to_cubin with ptxas's report on each kernel (NVRTC's -Xptxas -v): registers, spill
// stores and loads, shared and local memory. For tests of the machine code, which read it
// next to the cubin's disassembly.
struct CubinWithPtxasLog {
  std::string cubin;
  std::string log;  // NVRTC's program log: the "ptxas info" lines
};
absl::StatusOr<CubinWithPtxasLog> compile_to_cubin_with_ptxas_log(const std::string& source,
                                                                  const std::string& name,
                                                                  int arch);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_NVRTC_COMPILER_H_
