// The CPU executor's kernel families, one per anchor kind, each in its own file;
// execute_kernel (kernel_executor.cc) picks one. Private to runtime/cpu.
#ifndef KILN_RUNTIME_CPU_KERNEL_FAMILIES_H_
#define KILN_RUNTIME_CPU_KERNEL_FAMILIES_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "jit/fusion/kernel_ir.h"
#include "runtime/buffer.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {

// Runs space 0 over tiles and stores every output: the whole of a pointwise kernel (with
// `anchor` null), or an anchored kernel's epilogue over `anchor`, the anchor's result.
void run_pointwise(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                   const std::vector<double>& params, const void* anchor);

// Sum/mean/max/min and argmax/argmin over the reduced axes (kReduce, kArgReduce).
void run_reduce(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                const std::vector<double>& params);

// softmax / log_softmax / layer_norm / rms_norm along the anchor axis (kRowNorm).
void run_row_norm(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                  const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                  const std::vector<double>& params);

// cumsum along the anchor axis (kRowNorm's scan).
void run_cumsum(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                const std::vector<double>& params);

// topk_indices along the anchor axis (kRowNorm's selection).
void run_topk_indices(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                      const std::vector<double>& params);

// update_slice: the update written into output 0, which already holds x (kUpdateSlice).
void run_update_slice(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                      const std::vector<double>& params);

// scaled_dot_product_attention: an online softmax over key tiles (kAttention).
void run_attention(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                   const std::vector<double>& params);

// A batched, broadcasting matmul on Eigen's GEMM, then the epilogue (kMatmul).
void run_matmul(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                const std::vector<double>& params);

// Concatenation of the anchor's operands along the anchor axis (kConcat).
void run_concat(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                const std::vector<double>& params);

// A user's custom kernel: its C++ fallback runs once over the whole dense buffers
// (kCustomKernel).
void run_custom_kernel(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                       const std::vector<const Buffer*>& inputs,
                       const std::vector<Buffer*>& outputs);

// Runs an anchored kernel with T the anchor dtype's register class: `compute(result)`
// writes the anchor's result (a T*), then the epilogue stores the outputs from it.
template <class T, class Compute>
void run_anchored_as(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                     const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                     const std::vector<double>& params, Compute&& compute) {
  const int64_t count = ops::numel(launch.spaces[0]);
  // When the kernel only stores the anchor's result in its own representation, the anchor
  // writes straight into the output; otherwise into scratch that the epilogue reads.
  constexpr DType kNative = std::is_same_v<T, float>    ? DType::F32
                            : std::is_same_v<T, double> ? DType::F64
                                                        : DType::I64;
  const bool direct = program.stores.size() == 1 &&
                      program.instrs[program.stores[0].value].kind == jit::InstrKind::kAnchor &&
                      program.output_dtypes[program.stores[0].output] == kNative &&
                      program.anchor_dtype == kNative;
  std::vector<T> scratch;
  if (!direct) scratch.resize(count);
  T* result = direct ? outputs[program.stores[0].output]->as<T>() : scratch.data();
  compute(result);
  if (direct) return;
  // The anchor's result is what a stored one would be: i32 wraps, f16/bf16 rounds.
  if constexpr (std::is_same_v<T, int64_t>) {
    for (int64_t& v : scratch) v = wrap_int(program.anchor_dtype, v);
  } else if constexpr (std::is_same_v<T, float>) {
    round_all(program.anchor_dtype, scratch.data(), static_cast<int64_t>(scratch.size()));
  }
  run_pointwise(program, launch, inputs, outputs, params, scratch.data());
}

// run_anchored_as with T picked from the anchor's dtype; `compute` takes float*, double*
// and int64_t*.
template <class Compute>
void run_anchored(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                  const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                  const std::vector<double>& params, Compute&& compute) {
  switch (register_class(program.anchor_dtype)) {
    case RegisterClass::kFloat:
      return run_anchored_as<float>(program, launch, inputs, outputs, params, compute);
    case RegisterClass::kDouble:
      return run_anchored_as<double>(program, launch, inputs, outputs, params, compute);
    case RegisterClass::kInt:
      return run_anchored_as<int64_t>(program, launch, inputs, outputs, params, compute);
  }
}

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_KERNEL_FAMILIES_H_
