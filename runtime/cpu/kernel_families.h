// The CPU executor's kernel families, one per anchor kind, each in its own file;
// execute_kernel (kernel_executor.cc) picks one. Private to runtime/cpu.
#ifndef KILN_RUNTIME_CPU_KERNEL_FAMILIES_H_
#define KILN_RUNTIME_CPU_KERNEL_FAMILIES_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {

// Runs space 0 over tiles and stores every output: the whole of a pointwise kernel (with
// `anchor` null), or an anchored kernel's epilogue over `anchor`, the anchor's result.
void run_pointwise(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const base::Buffer*>& inputs,
                   const std::vector<base::Buffer*>& outputs, const std::vector<double>& params,
                   const void* anchor);
// run_pointwise over space-0 positions [begin, end) only, with anchor[0] holding the
// anchor's result at position `anchor_origin`; with anchor_instr >= 0, that space-0
// instruction's values are read from the anchor pointer (TileEvaluator::read_as_anchor).
void run_pointwise_range(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                         const std::vector<const base::Buffer*>& inputs,
                         const std::vector<base::Buffer*>& outputs,
                         const std::vector<double>& params, const void* anchor,
                         int64_t anchor_origin, int64_t begin, int64_t end, int anchor_instr = -1);

// Sum/mean/max/min and argmax/argmin over the reduced axes (kReduce, kArgReduce).
void run_reduce(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// softmax / log_softmax / layer_norm / rms_norm along the anchor axis (kRowNorm).
void run_row_norm(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                  const std::vector<const base::Buffer*>& inputs,
                  const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// cumsum along the anchor axis (kScan).
void run_cumsum(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// topk_indices along the anchor axis (kTopk).
void run_topk_indices(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const std::vector<const base::Buffer*>& inputs,
                      const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// update_slice: the update written into output 0, which already holds x (kUpdateSlice).
void run_update_slice(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const std::vector<const base::Buffer*>& inputs,
                      const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// index_add: the source added into output 0, which already holds x (kIndexAdd).
void run_index_add(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const base::Buffer*>& inputs,
                   const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// scaled_dot_product_attention: an online softmax over key tiles (kAttention).
void run_attention(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const base::Buffer*>& inputs,
                   const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// A batched, broadcasting matmul on the GEMM core (gemm.h; Eigen for f64 and integers), then
// the epilogue (kMatmul).
// Packs a matmul's B for the GEMM core and keeps it, when B is a plain view of an input
// that `inputs` gives (the others may be null): a loaded bundle's weights, before the first
// call (Backend::prepare).
void prepare_matmul_weight(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                           const std::vector<const base::Buffer*>& inputs);
void run_matmul(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// Concatenation of the anchor's operands along the anchor axis (kConcat).
void run_concat(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

// A user's custom kernel: its C++ fallback runs once over the whole dense buffers
// (kCustomKernel).
void run_custom_kernel(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                       const std::vector<const base::Buffer*>& inputs,
                       const std::vector<base::Buffer*>& outputs);

// A collective (all_reduce ...): this process's part, over whole dense buffers
// (kCollective; recv has no input buffer).
void run_collective(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                    const std::vector<const base::Buffer*>& inputs,
                    const std::vector<base::Buffer*>& outputs);

// Whether an anchored kernel only stores the anchor's result, in T's own representation:
// the anchor then writes straight into that output and there is no epilogue to run.
template <class T>
bool anchor_writes_output(const jit::KernelProgram& program) {
  constexpr DType kNative = std::is_same_v<T, float>    ? DType::F32
                            : std::is_same_v<T, double> ? DType::F64
                                                        : DType::I64;
  return program.stores.size() == 1 &&
         program.instrs[program.stores[0].value].kind == jit::InstrKind::kAnchor &&
         program.output_dtypes[program.stores[0].output] == kNative &&
         program.anchor_dtype == kNative;
}

// The epilogue over space-0 positions [begin, end), with the anchor's result there in
// part[0, end - begin): the result is made what a stored one would be (i32 wraps, f16/bf16
// rounds), then every output is stored. anchor_instr: as run_pointwise_range's.
template <class T>
void run_epilogue(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                  const std::vector<const base::Buffer*>& inputs,
                  const std::vector<base::Buffer*>& outputs, const std::vector<double>& params,
                  T* part, int64_t begin, int64_t end, int anchor_instr = -1) {
  if constexpr (std::is_same_v<T, int64_t>) {
    for (int64_t i = 0; i < end - begin; ++i) part[i] = wrap_int(program.anchor_dtype, part[i]);
  } else if constexpr (std::is_same_v<T, float>) {
    round_all(program.anchor_dtype, part, end - begin);
  }
  run_pointwise_range(program, launch, inputs, outputs, params, part, begin, begin, end,
                      anchor_instr);
}

// Runs an anchored kernel with T the anchor dtype's register class: `compute(result)`
// writes the anchor's result (a T*), then the epilogue stores the outputs from it.
template <class T, class Compute>
void run_anchored_as(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                     const std::vector<const base::Buffer*>& inputs,
                     const std::vector<base::Buffer*>& outputs, const std::vector<double>& params,
                     Compute&& compute) {
  const int64_t count = ops::numel(launch.spaces[0]);
  if (anchor_writes_output<T>(program)) {
    compute(outputs[program.stores[0].output]->as<T>());
    return;
  }
  std::vector<T> scratch(count);
  compute(scratch.data());
  run_epilogue(program, launch, inputs, outputs, params, scratch.data(), 0, count);
}

// run_anchored_as with T picked from the anchor's dtype; `compute` takes float*, double*
// and int64_t*.
template <class Compute>
void run_anchored(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                  const std::vector<const base::Buffer*>& inputs,
                  const std::vector<base::Buffer*>& outputs, const std::vector<double>& params,
                  Compute&& compute) {
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
