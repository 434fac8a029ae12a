// Matmul kernels: per batch matrix, the product on all cores, then the epilogue over it.
// f32 (and f16/bf16, computed in f32) runs on the GEMM core of gemm.h, reading an operand
// that is a plain load of an f32, bf16 or f16 input straight from its buffer through the
// view's strides (16-bit values are widened as the core packs them, and a weight stays
// packed); a computed operand (a fused prologue) is evaluated whole into f32 first. f64 and
// integer matmuls run on Eigen's GEMM, which reads an f64 input in place.
#include <Eigen/Core>
#include <algorithm>
#include <optional>

#include "base/thread_pool.h"
#include "runtime/cpu/elementwise_loops.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/matrix_operand.h"
#include "runtime/cpu/quantized_gemm.h"
#include "runtime/cpu/scratch.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {
namespace {

using jit::KernelLaunch;
using jit::KernelProgram;

// The element type the GEMM core reads `dt` as, if it reads it in place at all.
std::optional<GemmElement> gemm_element(DType dt) {
  switch (dt) {
    case DType::F32:
      return GemmElement::kF32;
    case DType::BF16:
      return GemmElement::kBF16;
    case DType::F16:
      return GemmElement::kF16;
    default:
      return std::nullopt;
  }
}

// Operand k of a float-class matmul as GEMM operands per batch matrix: in place when it is a
// plain load of a dtype the core reads, else evaluated whole into f32.
class GemmMatrices {
 public:
  GemmMatrices(const KernelProgram& program, const KernelLaunch& launch,
               const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
               int k, const ops::Shape& shape) {
    std::optional<InPlaceMatrix> in_place = in_place_matrix(program, launch, inputs, k, shape);
    if (in_place && gemm_element(in_place->dtype)) {
      in_place_ = std::move(in_place);
      return;
    }
    evaluated_ = matrix_operand<float>(program, launch, inputs, params, k, shape);
  }

  // Batch matrix `batch` (counted in the operand's own batch matrices).
  GemmOperand at(int64_t batch) const {
    if (!in_place_) {
      return {evaluated_.batch(batch), evaluated_.row_stride, evaluated_.col_stride,
              evaluated_.version};
    }
    const InPlaceMatrix& m = *in_place_;
    const int64_t bytes = dtype_size(m.dtype);
    return {m.buffer->data() + m.batch_at[batch] * bytes, m.row_stride, m.col_stride,
            m.buffer->version(), *gemm_element(m.dtype)};
  }

 private:
  std::optional<InPlaceMatrix> in_place_;
  MatrixOperand<float> evaluated_;
};

// The instruction that reads the values of `values` (the anchor may be read by several
// kAnchor instructions), when there is exactly one and none of `values` is stored; else -1.
int sole_user(const KernelProgram& program, const std::vector<int>& values) {
  const std::vector<jit::Instr>& instrs = program.instrs;
  auto is_value = [&](int k) { return std::find(values.begin(), values.end(), k) != values.end(); };
  for (const jit::Store& store : program.stores) {
    if (is_value(store.value)) return -1;
  }
  int user = -1;
  for (size_t k = 0; k < instrs.size(); ++k) {
    for (int operand : instrs[k].operands) {
      if (operand < 0 || !is_value(operand)) continue;
      if (user >= 0 && user != static_cast<int>(k)) return -1;  // a second user
      user = static_cast<int>(k);
    }
  }
  return user;
}

// The load of an f32 input that instruction `sum` adds to one of `values` (so not a second
// read of the product), or null when `sum` is no such add.
const jit::Instr* added_load(const KernelProgram& program, const std::vector<int>& values,
                             int sum) {
  const jit::Instr& add = program.instrs[sum];
  if (add.kind != jit::InstrKind::kBinary || add.op != ops::OpKind::Add ||
      add.dtype != DType::F32) {
    return nullptr;
  }
  const bool first_is_value =
      std::find(values.begin(), values.end(), add.operands[0]) != values.end();
  const jit::Instr& load = program.instrs[add.operands[first_is_value ? 1 : 0]];
  if (load.kind != jit::InstrKind::kLoad || load.dtype != DType::F32 ||
      program.input_dtypes[load.input] != DType::F32) {
    return nullptr;
  }
  return &load;
}

// The f32 input that add `sum` adds to one of `values` as a bias row: broadcast over every
// row of space 0, one value per column of C. Null when `sum` is no such add.
const float* bias_row(const KernelProgram& program, const KernelLaunch& launch,
                      const std::vector<const base::Buffer*>& inputs,
                      const std::vector<int>& values, int sum) {
  const jit::Instr* load = added_load(program, values, sum);
  if (load == nullptr) return nullptr;
  const ops::Shape& space = launch.spaces[0];
  const int rank = static_cast<int>(space.size());
  const jit::ViewParams& view = launch.views[load->view];
  for (int d = 0; d < rank - 1; ++d) {
    if (space[d] != 1 && view.strides[d] != 0) return nullptr;  // varies by row
  }
  if (space[rank - 1] != 1 && view.strides[rank - 1] != 1) return nullptr;
  return inputs[load->input]->as<float>() + view.offset;
}

// The f32 input that add `sum` adds to one of `values` as a whole matrix: a load whose view
// walks space 0 contiguously (flat position f at offset + f), such as a residual, in a
// buffer that is no output. Null when `sum` is no such add.
const float* matrix_addend(const KernelProgram& program, const KernelLaunch& launch,
                           const std::vector<const base::Buffer*>& inputs,
                           const std::vector<base::Buffer*>& outputs,
                           const std::vector<int>& values, int sum) {
  const jit::Instr* load = added_load(program, values, sum);
  if (load == nullptr) return nullptr;
  const ops::Shape& space = launch.spaces[0];
  const jit::ViewParams& view = launch.views[load->view];
  const std::vector<int64_t> strides = ops::contiguous_strides(space);
  for (size_t d = 0; d < space.size(); ++d) {
    if (space[d] != 1 && view.strides[d] != strides[d]) return nullptr;
  }
  // The core writes C before it adds: an input that is also an output (donated, written
  // in place) must stay with the epilogue, which reads each element before storing it.
  const base::Buffer* input = inputs[load->input];
  for (const base::Buffer* out : outputs) {
    if (out == input || out->data() == input->data()) return nullptr;
  }
  return input->as<float>() + view.offset;
}

// The start of a matmul's epilogue that the GEMM core computes as it finishes C (gemm.h's
// GemmEpilogue): a linear layer's bias (the add of an f32 input broadcast over every row,
// the anchor's only user), then a chain of steps, each its value's only user: an f32 unary
// op (gelu, relu, ...) or the add of a whole f32 matrix (a residual). The core's values
// are bit for bit the epilogue's (the same sums, the evaluator's own unary_f32), and the
// rest of the epilogue reads instruction `last` from C (TileEvaluator::read_as_anchor).
struct CoreEpilogue {
  struct Step {
    ops::OpKind unary = ops::OpKind::Add;  // the op, when `addend` is null
    const float* addend = nullptr;         // the matrix added, at space 0's flat positions
  };
  const float* bias = nullptr;
  std::vector<Step> steps;
  int last = -1;  // the instruction C holds when the core is done

  // The GEMM epilogue for a product whose C(0, 0) is space 0's flat position `begin`, with
  // n columns per row.
  GemmEpilogue for_part(int64_t begin, int64_t n) const {
    GemmEpilogue e{bias, {}};
    if (steps.empty()) return e;
    e.finish = [this, begin, n](float* values, int64_t row, int64_t col, int64_t count) {
      const int64_t at = begin + row * n + col;
      for (const Step& step : steps) {
        if (step.addend != nullptr) {
          simd_add(values, step.addend + at, values, static_cast<size_t>(count));
        } else {
          unary_f32(step.unary, values, values, count);
        }
      }
    };
    return e;
  }
};

std::optional<CoreEpilogue> core_epilogue(const KernelProgram& program, const KernelLaunch& launch,
                                          const std::vector<const base::Buffer*>& inputs,
                                          const std::vector<base::Buffer*>& outputs,
                                          const jit::MatmulShape& mm) {
  const ops::Shape& space = launch.spaces[0];
  const int rank = static_cast<int>(space.size());
  // C's columns must be space 0's last dim (a product with a vector b has one column per
  // row of space 0's last dim).
  if (program.anchor_dtype != DType::F32 || rank < 1 || space[rank - 1] != mm.n ||
      ops::numel(space) != mm.batches * mm.m * mm.n) {
    return std::nullopt;
  }
  std::vector<int> values;
  for (size_t k = 0; k < program.instrs.size(); ++k) {
    if (program.instrs[k].kind == jit::InstrKind::kAnchor) values.push_back(static_cast<int>(k));
  }
  CoreEpilogue core;
  int user = sole_user(program, values);
  if (user >= 0) core.bias = bias_row(program, launch, inputs, values, user);
  if (core.bias != nullptr) {
    core.last = user;
    values = {user};
    user = sole_user(program, values);
  }
  for (; user >= 0; user = sole_user(program, values)) {
    const jit::Instr& in = program.instrs[user];
    if (in.kind == jit::InstrKind::kUnary && in.dtype == DType::F32 &&
        program.instrs[in.operands[0]].dtype == DType::F32) {
      core.steps.push_back({in.op, nullptr});
    } else if (const float* addend =
                   matrix_addend(program, launch, inputs, outputs, values, user)) {
      core.steps.push_back({ops::OpKind::Add, addend});
    } else {
      break;
    }
    core.last = user;
    values = {user};
  }
  if (core.last < 0) return std::nullopt;
  return core;
}

// Whether every batch matrix reads the same B and batch matrix b of A starts where b - 1's
// rows would go on (row b · m of batch 0's matrix), so that all of them are one product.
template <class AMatrix, class BMatrix>
bool rows_follow_on(const AMatrix& a_matrix, const BMatrix& b_matrix, int64_t batches, int64_t m) {
  const GemmOperand a0 = a_matrix(0), b0 = b_matrix(0);
  for (int64_t bi = 1; bi < batches; ++bi) {
    const GemmOperand a = a_matrix(bi), b = b_matrix(bi);
    if (b.data != b0.data || b.row_stride != b0.row_stride || b.col_stride != b0.col_stride ||
        a.row_stride != a0.row_stride || a.col_stride != a0.col_stride ||
        a.data != a0.from_row(bi * m).data) {
      return false;
    }
  }
  return true;
}

// Operand b as a block-quantized weight that quantized_gemm reads in place: a plain load of
// a block-quantized input whose columns are weight rows (k contiguous, every column and
// batch matrix starting at a block boundary, k a positive multiple of 32). nullopt for any
// other b, which is read as f32 (a view of a weight that cuts its blocks: decoded whole).
std::optional<InPlaceMatrix> quantized_weight(const KernelProgram& program,
                                              const KernelLaunch& launch,
                                              const std::vector<const base::Buffer*>& inputs,
                                              const jit::MatmulShape& mm) {
  std::optional<InPlaceMatrix> b = in_place_matrix(program, launch, inputs, 1, mm.b);
  if (!b || !is_block_quantized(b->dtype) || mm.k == 0 || mm.k % 32 != 0) return std::nullopt;
  const int64_t values = block_values(b->dtype);
  if ((mm.k > 1 && b->row_stride != 1) || (mm.n > 1 && b->col_stride % values != 0)) {
    return std::nullopt;
  }
  for (int64_t at : b->batch_at) {
    if (at % values != 0) return std::nullopt;
  }
  return b;
}

// Batch matrix `at` (an element offset) of quantized weight b as quantized_gemm reads it.
QuantizedMatrix quantized_matrix(const InPlaceMatrix& b, int64_t at, int64_t k, int64_t n) {
  const int64_t values = block_values(b.dtype);
  return {b.dtype,
          b.buffer->as<uint8_t>() + storage_bytes(b.dtype, at),
          storage_bytes(b.dtype, n > 1 ? b.col_stride : values),
          n,
          k,
          b.buffer->version()};
}

// The f32 matmul and its epilogue. Small matrices in many batches (attention heads) go a
// batch per task, then the epilogue runs over all of them. Otherwise each batch matrix is
// done in chunks of rows: the product of a chunk on all cores, then the epilogue over it
// while it is still in cache (the whole product of a large matmul is not).
void run_matmul_f32(const KernelProgram& program, const KernelLaunch& launch,
                    const std::vector<const base::Buffer*>& inputs,
                    const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  const int64_t m = mm.m, k = mm.k, n = mm.n, batches = mm.batches;
  if (batches == 0) return;
  const GemmMatrices a(program, launch, inputs, params, 0, mm.a);
  // A block-quantized weight is read in place by the quantized core; any other b as the
  // GEMM core reads it.
  const std::optional<InPlaceMatrix> quantized = quantized_weight(program, launch, inputs, mm);
  std::optional<GemmMatrices> b;
  if (!quantized) b.emplace(program, launch, inputs, params, 1, mm.b);
  // matmul_batch_offsets counts in contiguous matrices; their index picks the view's offset.
  const jit::MatmulBatchOffsets offsets = jit::matmul_batch_offsets(mm);
  auto a_matrix = [&](int64_t bi) { return a.at(m * k == 0 ? 0 : offsets.a[bi] / (m * k)); };
  auto b_index = [&](int64_t bi) { return k * n == 0 ? 0 : offsets.b[bi] / (k * n); };
  auto b_matrix = [&](int64_t bi) {
    if (quantized) {  // stands in for the rows_follow_on check: where the weight starts
      return GemmOperand{quantized->buffer->data() +
                             storage_bytes(quantized->dtype, quantized->batch_at[b_index(bi)]),
                         0, 0};
    }
    return b->at(b_index(bi));
  };
  const bool direct = anchor_writes_output<float>(program);
  float* out = direct ? outputs[program.stores[0].output]->as<float>() : nullptr;
  auto epilogue = [&](float* part, int64_t begin, int64_t end) {
    if (!direct) run_epilogue(program, launch, inputs, outputs, params, part, begin, end);
  };
  if (!quantized && batches >= base::worker_count() && m * n * k < (int64_t{1} << 21)) {
    ScratchFloats scratch(direct ? 0 : batches * m * n);
    float* result = direct ? out : scratch.data();
    base::parallel_for(batches, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t bi = b0; bi < b1; ++bi) {
        gemm_f32(m, n, k, a_matrix(bi), b_matrix(bi), result + bi * m * n, n);
      }
    });
    epilogue(result, 0, batches * m * n);
    return;
  }
  // A bias row and an activation go into the core; when their result is all the kernel
  // stores, the core writes it straight into the output and there is no epilogue pass.
  const std::optional<CoreEpilogue> core =
      direct ? std::nullopt : core_epilogue(program, launch, inputs, outputs, mm);
  const int core_last = core ? core->last : -1;
  const bool core_output = core && program.stores.size() == 1 &&
                           program.stores[0].value == core_last &&
                           program.output_dtypes[program.stores[0].output] == DType::F32;
  float* target = direct || core_output ? outputs[program.stores[0].output]->as<float>() : nullptr;
  // Batches that share one B and whose A matrices follow one another row after row (a linear
  // layer over [sentences, tokens, features]) are one product of batches · m rows: one
  // parallel split and no short row tile per batch. MiniLM's linears at 8 × 64 were eight
  // products of 64 rows each, 64 = 5 · 12 + 4 on AVX-512.
  const bool one_product = batches > 1 && rows_follow_on(a_matrix, b_matrix, batches, m);
  const int64_t products = one_product ? 1 : batches, rows_each = one_product ? batches * m : m;
  // Chunks of at most 144 rows per core, of even size in whole row tiles of the core. The
  // quantized core takes up to 1024 rows at once: each call rounds its activations and
  // decodes its weight panels, which more rows amortize.
  const int64_t per_chunk = (quantized ? 1024 : 144 * base::worker_count());
  const int64_t chunks = target ? 1 : (rows_each + per_chunk - 1) / per_chunk;
  const int64_t tile = gemm_row_tile();
  const int64_t chunk_rows = ((rows_each + chunks - 1) / chunks + tile - 1) / tile * tile;
  ScratchFloats scratch(target ? 0 : chunk_rows * n);
  for (int64_t bi = 0; bi < products; ++bi) {
    std::optional<PackedGemmB> packed;
    if (!quantized) packed = pack_gemm_b(k, n, b_matrix(bi));
    const GemmOperand matrix = a_matrix(bi);
    for (int64_t r0 = 0; r0 < rows_each; r0 += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, rows_each - r0);
      const int64_t begin = (bi * rows_each + r0) * n;
      const GemmOperand part = matrix.from_row(r0);
      float* c = target ? target + begin : scratch.data();
      const GemmEpilogue epilogue = core ? core->for_part(begin, n) : GemmEpilogue{};
      if (quantized) {
        quantized_gemm(rows, part,
                       quantized_matrix(*quantized, quantized->batch_at[b_index(bi)], k, n), c, n,
                       epilogue);
      } else {
        gemm_f32(rows, part, *packed, c, n, epilogue);
      }
      if (!target) {
        run_epilogue(program, launch, inputs, outputs, params, c, begin, begin + rows * n,
                     core_last);
      }
    }
  }
}

// An f64 or integer operand's matrices as Eigen's GEMM reads them: row-major, `outer`
// elements from one row to the next. An f64 input whose rows are each contiguous is read in
// place (an f64 matrix-vector product once copied all of A on every call); anything else (a
// computed operand, an integer or other-dtype input, columns apart) is evaluated whole into
// row-major storage first.
template <class T>
struct EigenOperand {
  MatrixOperand<T> matrices;
  int64_t outer = 0;
};

template <class T>
EigenOperand<T> eigen_operand(const KernelProgram& program, const KernelLaunch& launch,
                              const std::vector<const base::Buffer*>& inputs,
                              const std::vector<double>& params, int k, const ops::Shape& shape) {
  const int rank = static_cast<int>(shape.size());
  const int64_t rows = shape[rank - 2], cols = shape[rank - 1];
  EigenOperand<T> op;
  if constexpr (std::is_same_v<T, double>) {
    op.matrices = matrix_operand<double>(program, launch, inputs, params, k, shape);
    // A dim of extent 1 is never stepped, so its stride is free.
    const int64_t rs = op.matrices.row_stride, cs = op.matrices.col_stride;
    if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= cols)) {
      op.outer = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
      return op;
    }
  }
  op.matrices = MatrixOperand<T>();
  op.matrices.storage = evaluate_operand<T>(program, launch, inputs, params, k);
  op.matrices.data = op.matrices.storage.data();
  op.matrices.row_stride = cols;
  op.matrices.col_stride = 1;
  const int64_t batches = rows * cols == 0 ? 0 : ops::numel(shape) / (rows * cols);
  for (int64_t bi = 0; bi < batches; ++bi) op.matrices.batch_at.push_back(bi * rows * cols);
  op.outer = std::max<int64_t>(cols, 1);
  return op;
}

template <class T>
void matmul(const KernelProgram& program, const KernelLaunch& launch,
            const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
            T* result) {
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  const int64_t m = mm.m, k = mm.k, n = mm.n, batches = mm.batches;
  std::fill_n(result, ops::numel(launch.spaces[0]), T{});
  if (batches == 0 || k == 0) return;
  const EigenOperand<T> a = eigen_operand<T>(program, launch, inputs, params, 0, mm.a);
  const EigenOperand<T> b = eigen_operand<T>(program, launch, inputs, params, 1, mm.b);
  // matmul_batch_offsets counts in contiguous matrices; their index picks the batch matrix.
  const jit::MatmulBatchOffsets offsets = jit::matmul_batch_offsets(mm);
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Operand = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
  for (int64_t bi = 0; bi < batches; ++bi) {
    Eigen::Map<RowMajor> mc(result + bi * m * n, m, n);
    const Operand ma(a.matrices.batch(offsets.a[bi] / (m * k)), m, k,
                     Eigen::OuterStride<>(a.outer));
    const Operand mb(b.matrices.batch(offsets.b[bi] / (k * n)), k, n,
                     Eigen::OuterStride<>(b.outer));
    // Rows split across cores; Eigen's kernel does each block.
    base::parallel_for(m, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n * k)),
                       [&](int64_t r0, int64_t r1) {
                         mc.middleRows(r0, r1 - r0).noalias() = ma.middleRows(r0, r1 - r0) * mb;
                       });
  }
}

}  // namespace

void prepare_matmul_weight(const KernelProgram& program, const KernelLaunch& launch,
                           const std::vector<const base::Buffer*>& inputs) {
  if (register_class(program.anchor_dtype) != RegisterClass::kFloat) return;
  const jit::Instr& load = program.instrs[program.anchor_operands[1]];
  if (load.kind != jit::InstrKind::kLoad || inputs[load.input] == nullptr) return;
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  if (mm.batches == 0 || mm.k == 0 || mm.n == 0) return;
  if (quantized_weight(program, launch, inputs, mm)) return;  // read in place, never packed
  const std::optional<InPlaceMatrix> b = in_place_matrix(program, launch, inputs, 1, mm.b);
  if (!b || !gemm_element(b->dtype)) return;
  const GemmMatrices matrices(program, launch, inputs, {}, 1, mm.b);
  for (size_t bi = 0; bi < b->batch_at.size(); ++bi) {
    pack_gemm_b(mm.k, mm.n, matrices.at(static_cast<int64_t>(bi)), /*keep_now=*/true);
  }
}

void run_matmul(const KernelProgram& program, const KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs,
                const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  if (register_class(program.anchor_dtype) == RegisterClass::kFloat) {
    return run_matmul_f32(program, launch, inputs, outputs, params);
  }
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    if constexpr (!std::is_same_v<T, float>) matmul<T>(program, launch, inputs, params, result);
  });
}

}  // namespace kiln::runtime::cpu
