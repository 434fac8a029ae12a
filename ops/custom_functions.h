// The registry of user-defined elementwise functions (kiln/custom.h). A registered function
// is an op like any other: the `custom` op node carries its id, inference checks its arity,
// the reference evaluator and the CPU executor call its C++ definition, and the CUDA
// renderer pastes its device function into every kernel that uses it.
//
// Definitions never change once registered and are never removed, so an id stays valid for
// the life of the process and compiled kernels keyed by it stay right.
#ifndef KILN_OPS_CUSTOM_FUNCTIONS_H_
#define KILN_OPS_CUSTOM_FUNCTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/custom_kernel_args.h"
#include "ops/value_type.h"

namespace kiln::ops {

// out[e] = f(inputs[0][e], ..., inputs[arity-1][e]) for e < n.
using CustomBatchFn = std::function<void(int64_t n, const float* const* inputs, float* out)>;

struct CustomFunction {
  std::string name;         // a C identifier, also the CUDA device function's name
  int arity = 1;            // 1 to 3 inputs
  std::string cuda_source;  // defines `__device__ float <name>(float, ...)`
  CustomBatchFn cpu;
  uint64_t source_hash = 0;  // of the CUDA source: part of every kernel key that uses it
};

constexpr int kMaxCustomArity = 3;

// Why `f` cannot be registered (a bad name or arity, a missing definition), or OK.
absl::Status check_custom_function(const CustomFunction& f);

// Registers `f` and returns its id; registering an equal definition again returns the same
// id. Fails on a bad name or arity, or a name already taken by a different definition.
absl::StatusOr<int> register_custom_function(CustomFunction f);

// The definition of id `id`; nullptr when no such function is registered.
const CustomFunction* custom_function(int id);
std::optional<int> custom_function_id(std::string_view name);

// A whole kernel of the user's: it reads its inputs as dense row-major buffers and writes one
// output. Nothing fuses into it; the planner stores its inputs and its result.
struct CustomKernelLaunch {
  int64_t grid[3] = {1, 1, 1};
  int block[3] = {256, 1, 1};
  int shared_bytes = 0;
};

struct CustomKernel {
  std::string name;  // a C identifier: the __global__ function's name
  int arity = 1;     // 1 to kMaxCustomKernelInputs inputs
  // Defines extern "C" __global__ void <name>(KilnKernelArgs), with KilnKernelArgs as
  // kCustomKernelArgsSource (ops/custom_kernel_args.h) defines it; empty for a CPU-only kernel.
  std::string cuda_source;
  // The output's dtype and shape from the inputs'; a status error rejects the call.
  std::function<absl::StatusOr<ValueType>(const std::vector<ValueType>&)> infer;
  std::function<CustomKernelLaunch(const std::vector<ValueType>&, const ValueType&)> launch;
  std::function<void(const std::vector<const void*>& inputs, const std::vector<ValueType>& types,
                     void* output, const ValueType& output_type)>
      cpu;
  uint64_t source_hash = 0;
};

constexpr int kMaxCustomKernelInputs = 8;

// KilnKernelArgs (ops/custom_kernel_args.h) has room for this many inputs.
static_assert(sizeof(KilnKernelArgs::in) / sizeof(KilnKernelArgs::in[0]) == kMaxCustomKernelInputs);

absl::Status check_custom_kernel(const CustomKernel& k);
// The error of running CPU-only kernel `k` on `device_name` ("cuda:0").
std::string cpu_only_kernel_error(const CustomKernel& k, const std::string& device_name);
absl::StatusOr<int> register_custom_kernel(CustomKernel k);
const CustomKernel* custom_kernel(int id);
std::optional<int> custom_kernel_id(std::string_view name);

}  // namespace kiln::ops

#endif  // KILN_OPS_CUSTOM_FUNCTIONS_H_
