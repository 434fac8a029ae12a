// index_add (kIndexAdd): the source's elements, computed through the prologue, added into
// output 0 (which already holds a copy of x) at the positions the index input names. Every
// index is checked before anything is added, so a bad one leaves nothing half-written.
// Threads take whole outer slices (the dims before the axis), each of which only its thread
// writes, and add their slices in index order: the result is the reference's, bit for bit.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/thread_pool.h"
#include "ops/element_access.h"
#include "ops/index_add.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/register_io.h"

namespace kiln::runtime::cpu {
namespace {

// out[at .. at + n) += values[0 .. n), in the output's dtype: directly where the register
// class is the storage type, else through the register class and back (f16 and bf16 in
// float, i32 in 64-bit integers, wrapped as a store wraps).
template <class T>
void add_run(base::Buffer& out, DType dt, int64_t at, int64_t n, const T* values, T* scratch) {
  if (dt == register_dtype<T>()) {
    T* dst = out.as<T>() + at;
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_integral_v<T>) {  // two's complement wrap, no overflow
        dst[j] = static_cast<T>(static_cast<uint64_t>(dst[j]) + static_cast<uint64_t>(values[j]));
      } else {
        dst[j] += values[j];
      }
    }
    return;
  }
  load_run<T>(out, dt, at, n, scratch);
  for (int64_t j = 0; j < n; ++j) {
    if constexpr (std::is_integral_v<T>) {
      scratch[j] =
          static_cast<T>(static_cast<uint64_t>(scratch[j]) + static_cast<uint64_t>(values[j]));
    } else {
      scratch[j] += values[j];
    }
  }
  store_values<T>(out, dt, at, n, scratch);
}

}  // namespace

void run_index_add(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const base::Buffer*>& inputs,
                   const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  const int axis = program.anchor_attrs.axis;
  const ops::RowLayout source = ops::row_layout(launch.spaces[1], axis);
  const int64_t extent = launch.spaces[0][axis];
  const int k = program.anchor_index_input;
  const std::vector<int64_t> position =
      ops::index_add_positions(*inputs[k], program.input_dtypes[k], source.extent, extent);
  const int64_t slice = source.extent * source.inner;  // one outer index's source elements
  if (slice == 0) return;
  // Source slices per evaluator run: about a tile's worth, at least one.
  const int64_t per_run = std::max<int64_t>(1, kTile / std::max<int64_t>(1, source.inner));
  const int operand = program.anchor_operands[0];
  base::Buffer& out = *outputs[0];
  const DType dtype = program.output_dtypes[0];
  base::parallel_for(
      source.outer, std::max<int64_t>(1, 16384 / slice), [&](int64_t o0, int64_t o1) {
        TileEvaluator ev(program, launch, inputs, params, nullptr);
        std::vector<char> scratch;
        for (int64_t o = o0; o < o1; ++o) {
          for (int64_t l0 = 0; l0 < source.extent; l0 += per_run) {
            const int64_t l1 = std::min(source.extent, l0 + per_run);
            ev.run(1, source.at(o, l0, 0), (l1 - l0) * source.inner);
            ev.visit(operand, [&](const auto* values) {
              using T = std::remove_cv_t<std::remove_pointer_t<decltype(values)>>;
              scratch.resize(static_cast<size_t>(source.inner) * sizeof(T));
              for (int64_t l = l0; l < l1; ++l) {
                const int64_t at = (o * extent + position[l]) * source.inner;
                add_run<T>(out, dtype, at, source.inner, values + (l - l0) * source.inner,
                           reinterpret_cast<T*>(scratch.data()));
              }
            });
          }
        }
      });
}

}  // namespace kiln::runtime::cpu
