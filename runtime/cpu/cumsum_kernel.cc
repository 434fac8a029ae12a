// cumsum along the anchor axis (a row op, kScan): each row's running sum, from either
// end, with or without each element in its own sum.
#include <cstdint>
#include <type_traits>

#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/row_walk.h"

namespace kiln::runtime::cpu {

void run_cumsum(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    const jit::RowShape rows = jit::row_norm_shape(program, launch);
    // Lowering casts the operand to the anchor's dtype, whose register class is T. Floats add
    // in double (the reference's precision, and a row is a dependent chain anyway); integers
    // in uint64, so overflow wraps instead of being undefined.
    using Sum = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    const bool exclusive = program.anchor_attrs.exclusive;
    // A reverse scan walks the row from its last element: a negative step from there.
    const bool reverse = program.anchor_attrs.reverse;
    for_each_row<T>(program, launch, inputs, params, [&](const T* x, int64_t stride, int64_t r) {
      T* y = result + row_start(r, rows.extent, rows.inner);
      const int64_t first = reverse ? (rows.extent - 1) * stride : 0;
      const int64_t step = reverse ? -stride : stride;
      Sum total = 0;
      for (int64_t k = 0, at = first; k < rows.extent; ++k, at += step) {
        const Sum before = total;
        total += static_cast<Sum>(x[at]);
        y[at] = static_cast<T>(exclusive ? before : total);
      }
    });
  });
}

}  // namespace kiln::runtime::cpu
