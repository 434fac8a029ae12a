// Concat kernels: each operand is evaluated tile by tile on all cores, each tile written
// straight into its slice of the result.
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {
namespace {

using jit::KernelLaunch;
using jit::KernelProgram;
using ops::Shape;

template <class T>
void concat(const KernelProgram& program, const KernelLaunch& launch,
            const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
            T* result) {
  const Shape& out = launch.spaces[0];
  const int axis = program.anchor_attrs.axis;
  std::vector<int64_t> strides = ops::contiguous_strides(out);
  int64_t offset = 0;
  for (size_t k = 0; k < program.anchor_operands.size(); ++k) {
    const jit::ViewParams place{strides, offset * strides[axis]};
    evaluate_operand_into<T>(program, launch, inputs, params, static_cast<int>(k), place, result);
    offset += launch.spaces[k + 1][axis];
  }
}

}  // namespace

void run_concat(const KernelProgram& program, const KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    concat<T>(program, launch, inputs, params, result);
  });
}

}  // namespace kiln::runtime::cpu
