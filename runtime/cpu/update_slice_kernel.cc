// update_slice (kUpdateSlice): the update's elements, computed through the prologue, written
// into output 0 at `start` along the axis. Output 0 already holds x (the backend hands it
// x's own buffer or a copy), so nothing else is written: the cost is the update's size,
// whatever x's. A region write (anchor_attrs.offsets) writes the update's rows, each at its
// place in x. A large f32 update the code generator compiles runs as one compiled loop a row
// (compiled_pointwise.h).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/thread_pool.h"
#include "kiln/error.h"
#include "ops/element_access.h"
#include "ops/update_slice.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/register_io.h"

namespace kiln::runtime::cpu {

namespace {

// Where each row of the update (along its last dim) starts in x: at the row's index plus
// `first`, the update's place in x along every dim.
class RowPlaces {
 public:
  RowPlaces(const ops::Shape& x, const ops::Shape& update, std::vector<int64_t> first)
      : update_(update), first_(std::move(first)), strides_(ops::contiguous_strides(x)) {}

  int64_t operator()(int64_t row) const {
    const int rank = static_cast<int>(update_.size());
    int64_t at = first_[rank - 1] * strides_[rank - 1];
    for (int64_t d = rank - 2, rest = row; d >= 0; --d) {
      at += (rest % update_[d] + first_[d]) * strides_[d];
      rest /= update_[d];
    }
    return at;
  }

 private:
  const ops::Shape& update_;
  std::vector<int64_t> first_;
  std::vector<int64_t> strides_;
};

// A region write: the update's rows along its last dim, each a contiguous run of x at its
// place. Long rows are a tile each, so the evaluator reads a stencil's offset slices where
// they lie; short ones share a tile.
void write_region(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                  const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
                  const RowPlaces& place, base::Buffer& out) {
  const ops::Shape& update = launch.spaces[1];
  const int rank = static_cast<int>(update.size());
  if (ops::numel(update) == 0) return;
  const int64_t length = update[rank - 1];
  const int64_t rows = ops::numel(update) / length;
  const int64_t rows_per_run = length >= kTile / 4 ? 1 : std::max<int64_t>(1, kTile / length);
  const DType dtype = program.output_dtypes[0];
  base::parallel_for(rows, std::max<int64_t>(1, 16384 / length), [&](int64_t r0, int64_t r1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t r = r0; r < r1; r += rows_per_run) {
      const int64_t n = std::min(rows_per_run, r1 - r);
      ev.run(1, r * length, n * length);
      ev.visit(program.anchor_operands[0], [&](const auto* values) {
        using T = std::remove_cv_t<std::remove_pointer_t<decltype(values)>>;
        for (int64_t i = 0; i < n; ++i) {
          store_values<T>(out, dtype, place(r + i), length, values + i * length);
        }
      });
    }
  });
}

}  // namespace

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
  base::Buffer& out = *outputs[0];
  std::vector<int64_t> first = program.anchor_attrs.offsets;  // the update's place in x
  first.resize(x.size(), 0);
  first[axis] = start;
  const RowPlaces place(x, launch.spaces[1], std::move(first));
  if (run_compiled_update_slice(program, launch, inputs, params, place, out)) return;
  if (run == 0) return;
  const int operand = program.anchor_operands[0];
  const DType dtype = program.output_dtypes[0];
  if (!program.anchor_attrs.offsets.empty()) {
    write_region(program, launch, inputs, params, place, out);
    return;
  }
  base::parallel_for(outer, std::max<int64_t>(1, 16384 / run), [&](int64_t o0, int64_t o1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t o = o0; o < o1; ++o) {
      ev.run(1, o * run, run);
      ev.store(operand, out, dtype, (o * extent + start) * inner, run);
    }
  });
}

}  // namespace kiln::runtime::cpu
