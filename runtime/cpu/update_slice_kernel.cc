// update_slice (kUpdateSlice): the update's elements, computed through the prologue, written
// into output 0 at `start` along the axis. Output 0 already holds x (the backend hands it
// x's own buffer or a copy), so nothing else is written: the cost is the update's size,
// whatever x's.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/thread_pool.h"
#include "kiln/error.h"
#include "ops/element_access.h"
#include "ops/update_slice.h"
#include "runtime/cpu/kernel_families.h"

namespace kiln::runtime::cpu {

void run_update_slice(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                      const std::vector<const base::Buffer*>& inputs,
                      const std::vector<base::Buffer*>& outputs,
                      const std::vector<double>& params) {
  const ops::Shape& x = launch.spaces[0];
  const int axis = program.anchor_attrs.axis;
  // The update (space 1) as rows along the axis: per outer index, its rows are one
  // contiguous run of x, [start, start + length) along the axis times everything inside it.
  const jit::RowShape update = jit::row_norm_shape(program, launch);
  const int64_t outer = update.outer, inner = update.inner;
  const int64_t run = update.extent * inner;
  const int64_t extent = x.empty() ? 1 : x[axis];
  int64_t start = 0;
  if (program.anchor_start_input >= 0) {  // a start tensor, checked now that it is known
    const int k = program.anchor_start_input;
    start = static_cast<int64_t>(ops::load_double(*inputs[k], program.input_dtypes[k], 0));
    if (start < 0 || start > extent - update.extent) {
      throw Error(absl::StrCat("[update_slice] ",
                               ops::update_start_error(start, update.extent, extent, axis)));
    }
  } else {
    start = static_cast<int64_t>(params[program.anchor_param]);
  }
  if (run == 0) return;
  const int operand = program.anchor_operands[0];
  base::Buffer& out = *outputs[0];
  const DType dtype = program.output_dtypes[0];
  base::parallel_for(outer, std::max<int64_t>(1, 16384 / run), [&](int64_t o0, int64_t o1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t o = o0; o < o1; ++o) {
      ev.run(1, o * run, run);
      ev.store(operand, out, dtype, (o * extent + start) * inner, run);
    }
  });
}

}  // namespace kiln::runtime::cpu
