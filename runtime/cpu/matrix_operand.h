// An anchor operand (matmul's a and b, attention's q, k and v) as a stack of batch matrices
// read through strides. A plain load of an input of the operand's own type is read in place
// through its view (a transposed or head-split tensor costs no copy); anything else (a
// fused prologue, another dtype, a reversed view) is evaluated whole into contiguous storage
// first.
#ifndef KILN_RUNTIME_CPU_MATRIX_OPERAND_H_
#define KILN_RUNTIME_CPU_MATRIX_OPERAND_H_

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {

// An operand that is a plain load of an input, as batch matrices of the buffer through its
// view: element (i, j) of batch matrix bi is at batch_at[bi] + i * row_stride + j * col_stride
// (in elements of `dtype`).
struct InPlaceMatrix {
  const base::Buffer* buffer = nullptr;
  DType dtype = DType::F32;
  int64_t row_stride = 0, col_stride = 0;
  std::vector<int64_t> batch_at;
};

// Operand k (space k + 1) of an anchored kernel, as matrices of `shape`'s last two dims
// (`shape` is the space's shape, or matmul_shape's matrix form of a vector operand), read
// in place when it is a plain load of an input; nullopt for a computed operand.
inline std::optional<InPlaceMatrix> in_place_matrix(const jit::KernelProgram& program,
                                                    const jit::KernelLaunch& launch,
                                                    const std::vector<const base::Buffer*>& inputs,
                                                    int k, const ops::Shape& shape) {
  const jit::Instr& instr = program.instrs[program.anchor_operands[k]];
  if (instr.kind != jit::InstrKind::kLoad) return std::nullopt;
  const int rank = static_cast<int>(shape.size());
  const jit::ViewParams& view = launch.views[instr.view];
  std::vector<int64_t> strides = view.strides;
  if (launch.spaces[k + 1].size() == 1) {  // a vector: a row of A, or a column of B
    strides.insert(k == 0 ? strides.begin() : strides.end(), 0);
  }
  // A reversed view (a negative stride, from flip or a backward slice) is evaluated into
  // contiguous storage instead: the GEMM core and Eigen's maps take non-negative strides.
  for (int64_t stride : strides) {
    if (stride < 0) return std::nullopt;
  }
  InPlaceMatrix m;
  m.buffer = inputs[instr.input];
  m.dtype = program.input_dtypes[instr.input];
  m.row_stride = strides[rank - 2];
  m.col_stride = strides[rank - 1];
  int64_t batches = 1;
  for (int d = 0; d < rank - 2; ++d) batches *= shape[d];
  m.batch_at.resize(batches);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rest = bi, offset = view.offset;
    for (int d = rank - 3; d >= 0; --d) {
      offset += (rest % shape[d]) * strides[d];
      rest /= shape[d];
    }
    m.batch_at[bi] = offset;
  }
  return m;
}

template <class T>
struct MatrixOperand {
  const T* data = nullptr;  // the buffer (or storage); batch matrix bi starts at batch_at[bi]
  int64_t row_stride = 0, col_stride = 0;
  uint64_t version = 0;           // the buffer's version when read in place, else 0
  std::vector<int64_t> batch_at;  // per batch matrix (row-major over the leading dims)
  std::vector<T> storage;
  const T* batch(int64_t bi) const { return data + batch_at[bi]; }
};

// Operand k as matrices of T: read in place when it is a plain load of an input of T's own
// dtype, else evaluated whole into contiguous storage.
template <class T>
MatrixOperand<T> matrix_operand(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                                const std::vector<const base::Buffer*>& inputs,
                                const std::vector<double>& params, int k, const ops::Shape& shape) {
  constexpr DType kOwn = std::is_same_v<T, float> ? DType::F32 : DType::F64;
  MatrixOperand<T> op;
  std::optional<InPlaceMatrix> in_place = in_place_matrix(program, launch, inputs, k, shape);
  if (in_place && in_place->dtype == kOwn) {
    op.data = in_place->buffer->as<T>();
    op.row_stride = in_place->row_stride;
    op.col_stride = in_place->col_stride;
    op.version = in_place->buffer->version();
    op.batch_at = std::move(in_place->batch_at);
    return op;
  }
  const int rank = static_cast<int>(shape.size());
  const int64_t rows = shape[rank - 2], cols = shape[rank - 1];
  int64_t batches = 1;
  for (int d = 0; d < rank - 2; ++d) batches *= shape[d];
  op.batch_at.resize(batches);
  op.storage = evaluate_operand<T>(program, launch, inputs, params, k);
  op.data = op.storage.data();
  op.row_stride = cols;
  op.col_stride = 1;
  for (int64_t bi = 0; bi < batches; ++bi) op.batch_at[bi] = bi * rows * cols;
  return op;
}

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_MATRIX_OPERAND_H_
