// topk_indices along the anchor axis (a row op, kTopk): the positions of each row's k
// first elements in topk's order (kiln::math::topk_before, shared with every device).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "ops/scalar_math.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/row_walk.h"

namespace kiln::runtime::cpu {
namespace {

// The operand is compared in its own register class X (lowering does not cast it); the
// result holds k positions per row.
template <class X>
void topk_rows(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
               const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
               int64_t* result) {
  const jit::RowShape rows = jit::row_norm_shape(program, launch);
  const int64_t k = launch.spaces[0][program.anchor_attrs.axis];
  const bool largest = program.anchor_attrs.largest;
  if (k == 0) return;  // nothing to select (the result may have no storage at all)
  for_each_row<X>(program, launch, inputs, params, [&](const X* x, int64_t stride, int64_t r) {
    thread_local std::vector<int64_t> order;
    order.resize(rows.extent);
    std::iota(order.begin(), order.end(), int64_t{0});
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return math::topk_before(x[a * stride], a, x[b * stride], b, largest);
    });
    int64_t* y = result + row_start(r, k, rows.inner);
    for (int64_t j = 0; j < k; ++j) y[j * rows.inner] = order[j];
  });
}

}  // namespace

void run_topk_indices(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const std::vector<const base::Buffer*>& inputs,
                      const std::vector<base::Buffer*>& outputs,
                      const std::vector<double>& params) {
  run_anchored_as<int64_t>(program, launch, inputs, outputs, params, [&](int64_t* result) {
    switch (register_class(program.instrs[program.anchor_operands[0]].dtype)) {
      case RegisterClass::kFloat:
        return topk_rows<float>(program, launch, inputs, params, result);
      case RegisterClass::kDouble:
        return topk_rows<double>(program, launch, inputs, params, result);
      case RegisterClass::kInt:
        return topk_rows<int64_t>(program, launch, inputs, params, result);
    }
  });
}

}  // namespace kiln::runtime::cpu
