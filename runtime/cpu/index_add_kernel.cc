// index_add (kIndexAdd): the source's elements, computed through the prologue, added into
// output 0 (which already holds a copy of x) at the positions the index input names. Every
// index is checked before anything is added, so a bad one leaves nothing half-written.
// Threads take whole outer slices (the dims before the axis), each of which only its thread
// writes, and add their slices in index order: the result is the reference's, bit for bit.
// Integer sums with a single outer slice split the axis instead (add_partials_in_parallel);
// floating-point sums of a stored tensor with one outer slice add its rows directly
// (add_stored_rows).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/thread_pool.h"
#include "kiln/dtype.h"
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

// Integer sums along the axis of a source with one outer slice (bincount, segment sums of
// integers): threads take stretches of the axis, each adding into a zeroed partial of the
// output, and the partials are added into the output after. Integer adds wrap, so any order
// gives the same bits; floating-point sums keep the index order (run_index_add).
constexpr int64_t kMaxPartial = int64_t{1} << 16;  // output elements per partial

bool sum_partials_in_parallel(DType dtype, const ops::RowLayout& source, int64_t extent) {
  return !is_floating(dtype) && source.outer == 1 && extent * source.inner <= kMaxPartial &&
         source.extent * source.inner >= 4 * kTile && base::worker_count() > 1;
}

void add_partials_in_parallel(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                              const std::vector<const base::Buffer*>& inputs,
                              const std::vector<double>& params, const ops::RowLayout& source,
                              int64_t extent, const std::vector<int64_t>& position,
                              base::Buffer& out, DType dtype) {
  const int64_t inner = source.inner, size = extent * inner;
  const int parts = base::worker_count();
  std::vector<std::vector<int64_t>> partial(parts, std::vector<int64_t>(size, 0));
  const int64_t per_part = (source.extent + parts - 1) / parts;
  const int64_t per_run = std::max<int64_t>(1, kTile / std::max<int64_t>(1, inner));
  base::parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t end = std::min(source.extent, (p + 1) * per_part);
      for (int64_t l0 = p * per_part; l0 < end; l0 += per_run) {
        const int64_t l1 = std::min(end, l0 + per_run);
        ev.run(1, source.at(0, l0, 0), (l1 - l0) * inner);
        ev.visit(program.anchor_operands[0], [&](const auto* values) {
          using T = std::remove_cv_t<std::remove_pointer_t<decltype(values)>>;
          if constexpr (std::is_integral_v<T>) {
            uint64_t* sums = reinterpret_cast<uint64_t*>(partial[p].data());
            for (int64_t l = l0; l < l1; ++l) {
              const int64_t at = position[l] * inner;
              for (int64_t i = 0; i < inner; ++i) {
                sums[at + i] += static_cast<uint64_t>(values[(l - l0) * inner + i]);
              }
            }
          }
        });
      }
    }
  });
  std::vector<int64_t> scratch(size);
  for (const std::vector<int64_t>& part : partial) {
    add_run<int64_t>(out, dtype, 0, size, part.data(), scratch.data());
  }
}

// A floating-point sum whose source is a stored tensor of the output's dtype, read in
// order (a segment sum of points): the source rows are added where they lie, in index order
// (the reference's bits), without an evaluator run and a call per row. One thread: splitting
// the output positions between threads had each scan every row, which took twice as long on
// two cores.
template <class T>
bool add_stored_rows(const jit::KernelProgram& program,
                     const std::vector<const base::Buffer*>& inputs, const ops::RowLayout& source,
                     const std::vector<int64_t>& position, base::Buffer& out) {
  const jit::Instr& operand = program.instrs[program.anchor_operands[0]];
  if (operand.kind != jit::InstrKind::kLoad || source.outer != 1 ||
      program.input_dtypes[operand.input] != register_dtype<T>() ||
      program.view_patterns[operand.view].access != jit::ViewAccess::kContiguous) {
    return false;
  }
  const T* rows = inputs[operand.input]->as<T>();
  T* sums = out.as<T>();
  const int64_t inner = source.inner;
  for (int64_t l = 0; l < source.extent; ++l) {
    T* sum = sums + position[l] * inner;
    const T* row = rows + l * inner;
    for (int64_t i = 0; i < inner; ++i) sum[i] += row[i];
  }
  return true;
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
  if (sum_partials_in_parallel(dtype, source, extent)) {
    add_partials_in_parallel(program, launch, inputs, params, source, extent, position, out, dtype);
    return;
  }
  if (dtype == DType::F32 && add_stored_rows<float>(program, inputs, source, position, out)) {
    return;
  }
  if (dtype == DType::F64 && add_stored_rows<double>(program, inputs, source, position, out)) {
    return;
  }
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
