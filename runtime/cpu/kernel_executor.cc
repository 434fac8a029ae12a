// execute_kernel picks the kernel family of a program's anchor; each family is in its own
// file (kernel_families.h), all built on the tile evaluator (tile_evaluator.h).
#include "runtime/cpu/kernel_executor.h"

#include "runtime/cpu/kernel_families.h"

namespace kiln::runtime::cpu {

void execute_kernel(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                    const std::vector<const base::Buffer*>& inputs,
                    const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  switch (program.anchor) {
    case jit::AnchorKind::kNone:
      return run_pointwise(program, launch, inputs, outputs, params, /*anchor=*/nullptr);
    case jit::AnchorKind::kReduce:
    case jit::AnchorKind::kArgReduce:
      return run_reduce(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kRowNorm:
      return run_row_norm(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kScan:
      return run_cumsum(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kTopk:
      return run_topk_indices(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kMatmul:
      return run_matmul(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kConcat:
      return run_concat(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kCustomKernel:
      return run_custom_kernel(program, launch, inputs, outputs);
    case jit::AnchorKind::kUpdateSlice:
      return run_update_slice(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kIndexAdd:
      return run_index_add(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kAttention:
      return run_attention(program, launch, inputs, outputs, params);
    case jit::AnchorKind::kCollective:
      return run_collective(program, launch, inputs, outputs);
  }
}

}  // namespace kiln::runtime::cpu
