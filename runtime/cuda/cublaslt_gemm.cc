// cublaslt_gemm (cublaslt_gemm.h): reading a matmul kernel's Kernel IR and launch shapes as
// one cublasLtMatmul (operands, batches, epilogue, bias), or naming why it is not one.
#include "runtime/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "jit/fusion/family_geometry.h"
#include "ops/value_type.h"
#include "runtime/cuda/cublaslt.h"

namespace kiln::runtime::cuda {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelLaunch;
using jit::KernelProgram;

std::atomic<uint64_t> calls{0};

absl::Status ineligible(const std::string& why) { return absl::FailedPreconditionError(why); }

bool cublaslt_dtype(DType dt) { return dt == DType::F16 || dt == DType::BF16 || dt == DType::F32; }

// A Kiln matrix operand (rows x cols, row-major indexing) seen in its buffer.
struct KilnMatrix {
  int input = -1;
  DType dtype = DType::F32;
  bool column_major = false;  // stride 1 along rows: a transposed view
  int64_t rows = 0, cols = 0, ld = 0, offset = 0, batch_stride = 0;
};

// The element stride between consecutive output batches in operand space `space`, when one
// stride serves every batch (numpy's batch broadcasting, matmul_batch_dim); an error when
// the batches are not evenly spaced (some dims broadcast, others not).
absl::StatusOr<int64_t> uniform_batch_stride(const KernelLaunch& launch, int space,
                                             const std::vector<int64_t>& strides) {
  const ops::Shape& out = launch.spaces[0];
  const ops::Shape& s = launch.spaces[space];
  const int out_batch = static_cast<int>(out.size()) - 2, r = static_cast<int>(s.size());
  std::vector<int64_t> coefficient(out_batch, 0);  // per output batch dim
  for (int j = 0; j < r - 2; ++j) {
    // A reversed batch dim (flip) has no one non-negative stride; below, -1 means "unset".
    if (s[j] != 1 && strides[j] < 0) return ineligible("a batch dim of an operand is reversed");
    if (s[j] != 1) coefficient[jit::matmul_batch_dim(r, out_batch, j)] = strides[j];
  }
  int64_t stride = -1, inner = 1;  // inner: output batches per step of dim o
  for (int o = out_batch - 1; o >= 0; --o) {
    if (out[o] == 1) continue;
    if (stride < 0) stride = coefficient[o];
    if (coefficient[o] != stride * inner) {
      return ineligible("the batches of an operand are not evenly spaced (a partial broadcast)");
    }
    inner *= out[o];
  }
  return stride < 0 ? 0 : stride;
}

// Operand `operand` (0: a, 1: b) of the matmul as a matrix in its buffer, or why it is not
// one cuBLASLt takes.
absl::StatusOr<KilnMatrix> operand_matrix(const KernelProgram& program, const KernelLaunch& launch,
                                          int operand) {
  const char* name = operand == 0 ? "operand a" : "operand b";
  const int space = operand + 1;
  const Instr& load = program.instrs[program.anchor_operands[operand]];
  int in_space = 0;
  for (const Instr& in : program.instrs) in_space += in.space == space ? 1 : 0;
  if (load.kind != InstrKind::kLoad || in_space != 1) {
    return ineligible(absl::StrCat(name, " has a prologue (computed, not loaded)"));
  }
  if (program.input_dtypes[load.input] != load.dtype) {  // a block-quantized weight
    return ineligible(
        absl::StrCat(name, " is stored as ", dtype_name(program.input_dtypes[load.input])));
  }
  if (!cublaslt_dtype(load.dtype)) {
    return ineligible(absl::StrCat(name, " is ", dtype_name(load.dtype), ", not f16, bf16 or f32"));
  }
  const ops::Shape& shape = launch.spaces[space];
  if (shape.size() < 2) return ineligible(absl::StrCat(name, " is a vector"));
  const std::vector<int64_t>& strides = launch.views[load.view].strides;
  const size_t r = shape.size();
  KilnMatrix m{load.input, load.dtype};
  m.rows = shape[r - 2];
  m.cols = shape[r - 1];
  m.offset = launch.views[load.view].offset;
  const int64_t row_stride = strides[r - 2], col_stride = strides[r - 1];
  if (row_stride < 0 || col_stride < 0) {
    return ineligible(absl::StrCat(name, " has a negative stride"));
  }
  if ((m.cols == 1 || col_stride == 1) && (m.rows == 1 || row_stride >= m.cols)) {
    m.ld = m.rows == 1 ? m.cols : row_stride;
  } else if ((m.rows == 1 || row_stride == 1) && (m.cols == 1 || col_stride >= m.rows)) {
    m.column_major = true;
    m.ld = m.cols == 1 ? m.rows : col_stride;
  } else {
    return ineligible(absl::StrCat(name, " is neither row-major nor transposed"));
  }
  absl::StatusOr<int64_t> batch = uniform_batch_stride(launch, space, strides);
  if (!batch.ok()) return batch.status();
  m.batch_stride = *batch;
  return m;
}

// Kiln's matrix `m` as cuBLASLt's column-major operand: a row-major matrix is its own
// transpose stored column-major (op N on a cols x rows matrix), a column-major one needs
// op T.
CublasLtOperand as_cublaslt(const KilnMatrix& m) {
  CublasLtOperand o;
  o.input = m.input;
  o.dtype = m.dtype;
  o.transposed = m.column_major;
  o.rows = static_cast<uint64_t>(m.column_major ? m.rows : m.cols);
  o.cols = static_cast<uint64_t>(m.column_major ? m.cols : m.rows);
  o.ld = std::max<int64_t>(m.ld, static_cast<int64_t>(o.rows));
  o.offset = m.offset;
  o.batch_stride = m.batch_stride;
  return o;
}

// What the epilogue does between the anchor and its one store.
struct Epilogue {
  int bias_load = -1;  // the bias's kLoad instruction
  bool relu = false;
  int store = -1;  // index into program.stores
  DType output_dtype = DType::F32;
  DType value_dtype = DType::F32;  // of the value the chain has reached
  std::vector<bool> accounted;     // per instruction: the anchor, a step, or the bias's way in
};

// The instructions that read each instruction, and the stores that write it (as -1 - store).
std::vector<std::vector<int>> readers_of(const KernelProgram& program) {
  std::vector<std::vector<int>> readers(program.instrs.size());
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    for (int o : program.instrs[i].operands) {
      if (o >= 0) readers[o].push_back(static_cast<int>(i));
    }
  }
  for (size_t s = 0; s < program.stores.size(); ++s) {
    readers[program.stores[s].value].push_back(-1 - static_cast<int>(s));
  }
  return readers;
}

// Whether a cast from `from` to `to` keeps every value exactly: to itself, or a 16-bit float
// to f32.
bool widens(DType from, DType to) {
  return from == to || ((from == DType::F16 || from == DType::BF16) && to == DType::F32);
}

// The bias load that `operand` of an add is (directly or through widening casts), or -1 when
// it is computed; marks the instructions on its way in `e.accounted`. A narrowing cast on
// the way is refused: cuBLASLt reads the bias as stored, so its rounding would be lost.
absl::StatusOr<int> bias_load_of(const KernelProgram& program, int operand, Epilogue& e) {
  const Instr& in = program.instrs[operand];
  e.accounted[operand] = true;
  if (in.kind == InstrKind::kCast) {
    const DType from = program.instrs[in.operands[0]].dtype;
    if (!widens(from, in.dtype)) {
      return ineligible(absl::StrCat("epilogue not supported: the bias is cast from ",
                                     dtype_name(from), " to ", dtype_name(in.dtype),
                                     " before the add (cuBLASLt would add it unrounded)"));
    }
    return bias_load_of(program, in.operands[0], e);
  }
  return in.kind == InstrKind::kLoad && in.space == 0 ? operand : -1;
}

// One step of the epilogue chain at instruction `i` (which reads `from`; `last`: the store
// reads `i`): a bias add, relu or cast folded into `e`, or why the step is not one cuBLASLt
// has.
//
// cuBLASLt keeps the accumulator in f32 through the bias and relu and rounds once, into D's
// dtype. So a cast that widens (f16/bf16 -> f32) is taken anywhere, and one that narrows only
// as the last step, from f32 into the output's dtype, where that one rounding is the
// kernel's own. A narrowing cast before the end (f32 -> f16 -> f32, or an f16 product cast to
// bf16) rounds a value cuBLASLt never rounds, so it is refused. (What remains different: the
// generated kernel rounds a 16-bit product to its dtype before the bias, cuBLASLt does not;
// see cublaslt_gemm.h.)
absl::Status fold_step(const KernelProgram& program, int from, int i, bool last, Epilogue& e) {
  const Instr& in = program.instrs[i];
  e.accounted[i] = true;
  switch (in.kind) {
    case InstrKind::kCast: {
      if (!cublaslt_dtype(in.dtype)) {
        return ineligible(absl::StrCat("epilogue not supported: a cast to ", dtype_name(in.dtype)));
      }
      const DType before = e.value_dtype;
      e.value_dtype = in.dtype;
      if (widens(before, in.dtype)) return absl::OkStatus();
      if (last && before == DType::F32) return absl::OkStatus();  // the one rounding, into D
      return ineligible(absl::StrCat("epilogue not supported: a narrowing cast from ",
                                     dtype_name(before), " to ", dtype_name(in.dtype),
                                     last ? "" : " before the end",
                                     " (cuBLASLt rounds once, from f32 into the output)"));
    }
    case InstrKind::kBinary: {
      if (in.op != ops::OpKind::Add) {
        return ineligible(absl::StrCat("epilogue not supported: ", ops::op_name(in.op)));
      }
      if (e.bias_load >= 0) return ineligible("epilogue not supported: a second add");
      if (e.relu) return ineligible("epilogue not supported: a bias added after the relu");
      absl::StatusOr<int> bias =
          bias_load_of(program, in.operands[0] == from ? in.operands[1] : in.operands[0], e);
      if (!bias.ok()) return bias.status();
      e.bias_load = *bias;
      e.value_dtype = in.dtype;
      if (e.bias_load < 0) {
        return ineligible("epilogue not supported: an add of a computed value (not a bias)");
      }
      return absl::OkStatus();
    }
    case InstrKind::kUnary:
      if (in.op == ops::OpKind::Relu && !e.relu) {
        e.relu = true;
        e.value_dtype = in.dtype;
        return absl::OkStatus();
      }
      if (in.op == ops::OpKind::Gelu) {
        return ineligible(
            "epilogue not supported: gelu (Kiln's is exact; cuBLASLt's GELU is the tanh "
            "approximation)");
      }
      return ineligible(absl::StrCat("epilogue not supported: ", ops::op_name(in.op)));
    default:
      return ineligible("epilogue not supported: it computes more than bias, relu and casts");
  }
}

// The one kAnchor instruction (the product, read in space 0), or -1 when there is not one.
int anchor_instr(const KernelProgram& program) {
  int at = -1;
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    if (program.instrs[i].kind != InstrKind::kAnchor) continue;
    if (at >= 0) return -1;
    at = static_cast<int>(i);
  }
  return at;
}

// Walks from the anchor to the one store through single readers, folding each step; every
// other instruction of space 0 makes the epilogue one cuBLASLt does not have.
absl::StatusOr<Epilogue> epilogue_of(const KernelProgram& program) {
  if (program.num_params > 0)
    return ineligible("epilogue not supported: it reads a scalar parameter");
  if (program.stores.size() != 1) return ineligible("the kernel stores more than one output");
  int at = anchor_instr(program);
  if (at < 0) return ineligible("the epilogue reads the product more than once");
  const std::vector<std::vector<int>> readers = readers_of(program);
  Epilogue e;
  e.accounted.assign(program.instrs.size(), false);
  e.accounted[at] = true;
  e.value_dtype = program.instrs[at].dtype;
  while (true) {
    if (readers[at].size() != 1) {
      return ineligible("epilogue not supported: a value is used more than once");
    }
    const int next = readers[at][0];
    if (next < 0) {
      e.store = -1 - next;
      break;
    }
    const bool last = readers[next].size() == 1 && readers[next][0] < 0;
    if (absl::Status s = fold_step(program, at, next, last, e); !s.ok()) return s;
    at = next;
  }
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    if (program.instrs[i].space == 0 && !e.accounted[i]) {
      return ineligible("epilogue not supported: it computes more than bias, relu and casts");
    }
  }
  e.output_dtype = program.output_dtypes[program.stores[e.store].output];
  return e;
}

// Whether cuBLASLt computes `out` from `in` operands in CUBLAS_COMPUTE_32F.
bool supported_types(DType in, DType out) { return out == in || out == DType::F32; }

// The bias load's view: a vector along the last dim, every other dim of extent > 1 stride 0.
absl::Status check_bias_view(const KernelLaunch& launch, const Instr& load) {
  const ops::Shape& out = launch.spaces[0];
  const std::vector<int64_t>& strides = launch.views[load.view].strides;
  const size_t r = out.size();
  for (size_t d = 0; d + 1 < r; ++d) {
    if (out[d] != 1 && strides[d] != 0) {
      return ineligible("the bias is not a vector along the last dim");
    }
  }
  if (out[r - 1] != 1 && strides[r - 1] != 1) {
    return ineligible("the bias is not a vector along the last dim");
  }
  return absl::OkStatus();
}

const char* epilogue_name(uint32_t epilogue) {
  switch (epilogue) {
    case kEpilogueRelu:
      return "RELU";
    case kEpilogueBias:
      return "BIAS";
    case kEpilogueReluBias:
      return "RELU_BIAS";
    default:
      return "DEFAULT";
  }
}

// Folds the batches into cuBLASLt's n (Kiln's rows) when every batch shares Kiln's b and
// Kiln's a is row-major with its batches following one another: one large GEMM instead of
// many small ones (a linear layer over [batch, tokens, features]).
bool fold_batches(int64_t batches, KilnMatrix& a, const KilnMatrix& b) {
  if (batches <= 1 || b.batch_stride != 0 || a.column_major) return false;
  if (a.rows == 1) {
    if (a.batch_stride < a.cols) return false;
    a.ld = a.batch_stride;
  } else if (a.batch_stride != a.rows * a.ld) {
    return false;
  }
  a.rows *= batches;
  a.batch_stride = 0;
  return true;
}

absl::Status check_sizes(int64_t m, int64_t n, int64_t k, int64_t batches) {
  if (m == 0 || n == 0 || k == 0 || batches == 0) return ineligible("an empty matrix");
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (m > kMax || n > kMax || k > kMax || batches > kMax) {
    return ineligible("a size past 2^31 - 1");
  }
  return absl::OkStatus();
}

}  // namespace

std::string CublasLtGemm::summary() const {
  return absl::StrCat(epilogue_name(epilogue), ", ", dtype_name(a.dtype), " -> ",
                      dtype_name(output_dtype), ", M ", n, " N ", m, " K ", k, ", ", batches,
                      batches == 1 ? " batch" : " batches");
}

uint64_t cublaslt_gemm_calls() { return calls.load(std::memory_order_relaxed); }

absl::StatusOr<CublasLtGemm> cublaslt_gemm(const KernelProgram& program,
                                           const KernelLaunch& launch) {
  calls.fetch_add(1, std::memory_order_relaxed);
  if (program.anchor != jit::AnchorKind::kMatmul) return ineligible("not a matmul");
  // A matrix times a vector (or a vector times a matrix, batched or not) drops the vector's
  // dimension from the product, so the product's batch dimensions are not the matrix's: the
  // generated kernel computes it.
  for (int space = 1; space <= 2; ++space) {
    if (launch.spaces[space].size() < 2) {
      return ineligible(absl::StrCat(space == 1 ? "operand a" : "operand b", " is a vector"));
    }
  }
  absl::StatusOr<KilnMatrix> a = operand_matrix(program, launch, 0);
  if (!a.ok()) return a.status();
  absl::StatusOr<KilnMatrix> b = operand_matrix(program, launch, 1);
  if (!b.ok()) return b.status();
  if (a->dtype != b->dtype) return ineligible("the operands' dtypes differ");
  absl::StatusOr<Epilogue> e = epilogue_of(program);
  if (!e.ok()) return e.status();
  if (!supported_types(a->dtype, e->output_dtype)) {
    return ineligible(absl::StrCat("cuBLASLt does not compute ", dtype_name(e->output_dtype),
                                   " from ", dtype_name(a->dtype)));
  }
  const jit::MatmulShape shape = jit::matmul_shape(launch);
  const int64_t batches = fold_batches(shape.batches, *a, *b) ? 1 : shape.batches;
  CublasLtGemm g;
  g.a = as_cublaslt(*b);
  g.b = as_cublaslt(*a);
  g.m = static_cast<uint64_t>(shape.n);
  g.n = static_cast<uint64_t>(a->rows);
  g.k = static_cast<uint64_t>(shape.k);
  if (absl::Status s = check_sizes(shape.n, a->rows, shape.k, batches); !s.ok()) return s;
  g.batches = static_cast<int32_t>(batches);
  g.output = program.stores[e->store].output;
  g.output_dtype = e->output_dtype;
  g.epilogue = e->relu ? kEpilogueRelu : kEpilogueDefault;
  if (e->bias_load >= 0) {
    const Instr& bias = program.instrs[e->bias_load];
    if (absl::Status s = check_bias_view(launch, bias); !s.ok()) return s;
    if (bias.dtype != e->output_dtype) {
      return ineligible(absl::StrCat("the bias is ", dtype_name(bias.dtype), ", the output ",
                                     dtype_name(e->output_dtype),
                                     " (cuBLASLt adds a bias of "
                                     "the output's dtype)"));
    }
    g.epilogue = e->relu ? kEpilogueReluBias : kEpilogueBias;
    g.bias_input = bias.input;
    g.bias_offset = launch.views[bias.view].offset;
  }
  return g;
}

}  // namespace kiln::runtime::cuda
