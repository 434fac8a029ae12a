// Concat kernels: each operand is evaluated whole and scattered into its slice of the
// result.
#include "base/thread_pool.h"
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
    std::vector<T> v = evaluate_operand<T>(program, launch, inputs, params, static_cast<int>(k));
    const Shape& s = launch.spaces[k + 1];
    jit::ViewParams place{strides, offset * strides[axis]};
    std::vector<int64_t> dst(v.size());
    view_offsets(s, place, 0, static_cast<int64_t>(v.size()), dst.data());
    for (size_t e = 0; e < v.size(); ++e) result[dst[e]] = v[e];
    offset += s[axis];
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
