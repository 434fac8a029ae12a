// scaled_dot_product_attention (kAttention) on the CPU: tasks of one batch·head and a block
// of query rows, on all cores. Per task, key tiles of kKeyTile: the raw scores S = Q Kᵀ ·
// scale (the GEMM core for f32, Eigen for f64) into a contiguous tile, the score ops of space
// 4 over it (a mask, or a hand-written form's own ops; one evaluator pass when the tile spans
// every key), the causal cut, then the online softmax (simd_math.h's online_softmax_tile for
// f32): a running max m and sum l per row, the accumulator scaled by exp(m_old - m_new) and
// P V added (the same GEMM). Only one tile of scores exists at a time, so memory never holds
// the Sq × Sk scores.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/thread_pool.h"
#include "ops/attention.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/matrix_operand.h"
#include "runtime/cpu/row_reductions.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyTile = 128;

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One key tile of the online softmax (simd_math.h's online_softmax_tile, which f32 uses):
// per row, probabilities relative to the new running max, the factor alpha that rescales
// the rows' earlier sums and accumulators, and the running max and sum brought up to date.
template <class T>
void softmax_tile(const T* in, T* out, int64_t rows, int64_t cols, T* max, T* sum, T* alpha) {
  if constexpr (std::is_same_v<T, float>) {
    online_softmax_tile(in, out, rows, cols, cols, max, sum, alpha);
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = in + r * cols;
      T* y = out + r * cols;
      const T new_max = std::max(max[r], row_max(x, cols, 1));
      // A row whose scores are all -inf so far keeps a max of -inf and subtracts 0, so no NaN
      // arises before its end (where 0 / 0 gives the composed form's NaN).
      const T base = std::isinf(new_max) && new_max < 0 ? T(0) : new_max;
      for (int64_t j = 0; j < cols; ++j) y[j] = std::exp(x[j] - base);
      alpha[r] = std::exp(max[r] - base);
      sum[r] = sum[r] * alpha[r] + static_cast<T>(row_sum(y, cols, 1, [](T v) { return v; }));
      max[r] = new_max;
    }
  }
}

// x *= s over n values (the scores' scale), in the widest vectors for f32.
template <class T>
void scale_values(T* x, int64_t n, T s) {
  if constexpr (std::is_same_v<T, float>) {
    simd_mul_scalar(x, s, x, static_cast<size_t>(n));
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  }
}

// out = in / divisor over n values (a row of Σ p v by its softmax sum), in the widest
// vectors for f32; a division, as the composed form's, not a multiply by the reciprocal.
template <class T>
void divide_row(const T* in, T divisor, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    simd_div_scalar(in, divisor, out, static_cast<size_t>(n));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] / divisor;
  }
}

// The score op split as (raw score [· c]) + X, where X is the same for every query row (a
// padding mask's key bias, (mask - 1) · 1e9, or a per-head bias over keys) and c is an
// optional constant factor: add(S, X) in either order, S the kAnchor or mul(kAnchor, kParam)
// in either order, and X reading only loads whose view does not move along the query axis,
// parameters, and elementwise ops of them. Such an X is computed once per task for a row of
// keys and added to every query row, instead of once per score (MiniLM: the mask's sub and
// mul over all 64 × 64 scores of each head). Only in f32 and f64 scores, where the kernel's
// own multiply and add round as the evaluator's would (16-bit scores round after each op).
struct QueryInvariantScore {
  int addend = -1;  // X, or -1 when the score has no such form
  int factor = -1;  // c's kParam instruction, or -1
};

QueryInvariantScore query_invariant_score(const jit::KernelProgram& program,
                                          const jit::KernelLaunch& launch, int score) {
  if (score < 0) return {};
  const std::vector<jit::Instr>& instrs = program.instrs;
  auto is = [&](int k, jit::InstrKind kind) { return k >= 0 && instrs[k].kind == kind; };
  const jit::Instr& add = instrs[score];
  if (add.kind != jit::InstrKind::kBinary || add.op != ops::OpKind::Add ||
      (add.dtype != DType::F32 && add.dtype != DType::F64)) {
    return {};
  }
  // Which operand is the raw score's side: the anchor, or the anchor times a parameter.
  QueryInvariantScore split;
  auto raw_side = [&](int k) {
    if (is(k, jit::InstrKind::kAnchor)) return true;
    const jit::Instr& mul = instrs[k];
    if (mul.kind != jit::InstrKind::kBinary || mul.op != ops::OpKind::Mul ||
        mul.dtype != add.dtype) {
      return false;
    }
    const auto [a, b] = std::pair{mul.operands[0], mul.operands[1]};
    if (is(a, jit::InstrKind::kAnchor) && is(b, jit::InstrKind::kParam)) split.factor = b;
    if (is(b, jit::InstrKind::kAnchor) && is(a, jit::InstrKind::kParam)) split.factor = a;
    return split.factor >= 0 && instrs[split.factor].dtype == add.dtype;
  };
  int addend = -1;
  if (raw_side(add.operands[0])) {
    addend = add.operands[1];
  } else if (split.factor = -1; raw_side(add.operands[1])) {
    addend = add.operands[0];
  } else {
    return {};
  }
  if (instrs[addend].dtype != add.dtype) return {};
  const ops::Shape& space = launch.spaces[4];
  if (space.size() < 2) return {};
  const size_t query_dim = space.size() - 2;
  std::vector<int> pending = {addend};
  while (!pending.empty()) {
    const jit::Instr& in = instrs[pending.back()];
    pending.pop_back();
    switch (in.kind) {
      case jit::InstrKind::kLoad:
        if (launch.views[in.view].strides[query_dim] != 0 && space[query_dim] != 1) return {};
        break;
      case jit::InstrKind::kParam:
        break;
      case jit::InstrKind::kUnary:
      case jit::InstrKind::kBinary:
      case jit::InstrKind::kWhere:
      case jit::InstrKind::kCast:
        for (int operand : in.operands) {
          if (operand >= 0) pending.push_back(operand);
        }
        break;
      default:  // the raw score, a position (arange, rand), a gather, a custom function
        return {};
    }
  }
  split.addend = addend;
  return split;
}

// rows × cols scores += addend[j] in column j.
template <class T>
void add_to_rows(T* scores, const T* addend, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = scores + r * cols;
    if constexpr (std::is_same_v<T, float>) {
      simd_add(row, addend, row, static_cast<size_t>(cols));
    } else {
      for (int64_t j = 0; j < cols; ++j) row[j] += addend[j];
    }
  }
}

template <class T>
using StridedMap = Eigen::Map<const RowMajor<T>, 0, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;

// rows × cols of `op`'s batch matrix `batch` from (row, 0).
template <class T>
StridedMap<T> block(const MatrixOperand<T>& op, int64_t batch, int64_t row, int64_t rows,
                    int64_t cols) {
  return StridedMap<T>(op.batch(batch) + row * op.row_stride, rows, cols,
                       Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(op.row_stride, op.col_stride));
}

// out (rows × cols, row stride ldc) = a (rows × depth) · b (depth × cols): the FMA GEMM core
// for f32, Eigen for f64.
template <class T, class A, class B>
void multiply(const A& a, const B& b, T* out, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    gemm_f32(a.rows(), b.cols(), a.cols(), {a.data(), a.rowStride(), a.colStride(), 0},
             {b.data(), b.rowStride(), b.colStride(), 0}, out, ldc);
  } else {
    Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>>(out, a.rows(), b.cols(),
                                                     Eigen::OuterStride<>(ldc))
        .noalias() = a * b;
  }
}

// Query blocks of at most this many rows (a decode step's, one query per head) take their
// scores and P V from the keys and values in place (simd_dot_rows, simd_weighted_rows): the
// GEMM core would pack a copy of every key and value of the tile for them, which for one row
// cost more than the products (a sixth of a SmolLM2 decode step at one thread).
constexpr int64_t kDirectRows = 4;

// Whether a block of `rows` f32 query rows can read q, k and v in place: each row contiguous.
template <class T>
bool reads_rows_in_place(const MatrixOperand<T>& q, const MatrixOperand<T>& k,
                         const MatrixOperand<T>& v, int64_t rows) {
  return std::is_same_v<T, float> && rows <= kDirectRows && q.col_stride == 1 &&
         k.col_stride == 1 && v.col_stride == 1;
}

// tile (rows × cols) = the block's queries · keys j0 ... j0 + cols - 1, row by row.
inline void direct_scores(const MatrixOperand<float>& q, const MatrixOperand<float>& k, int64_t qb,
                          int64_t i0, int64_t kb, int64_t j0, int64_t rows, int64_t cols,
                          int64_t depth, float* tile) {
  for (int64_t r = 0; r < rows; ++r) {
    simd_dot_rows(q.batch(qb) + (i0 + r) * q.row_stride, k.batch(kb) + j0 * k.row_stride,
                  k.row_stride, cols, depth, tile + r * cols);
  }
}

// out (rows × dv, row stride dv) = probs (rows × cols) · values j0 ... j0 + cols - 1.
inline void direct_values(const float* probs, const MatrixOperand<float>& v, int64_t kb, int64_t j0,
                          int64_t rows, int64_t cols, int64_t dv, float* out) {
  std::fill_n(out, rows * dv, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    simd_weighted_rows(probs + r * cols, v.batch(kb) + j0 * v.row_stride, v.row_stride, cols, dv,
                       out + r * dv);
  }
}

template <class T>
void attention(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
               const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
               T* result) {
  const MatrixOperand<T> q =
      matrix_operand<T>(program, launch, inputs, params, 0, launch.spaces[1]);
  const MatrixOperand<T> k =
      matrix_operand<T>(program, launch, inputs, params, 1, launch.spaces[2]);
  const MatrixOperand<T> v =
      matrix_operand<T>(program, launch, inputs, params, 2, launch.spaces[3]);
  const ops::AttentionShape s =
      ops::attention_shape(launch.spaces[1], launch.spaces[2], launch.spaces[3]);
  const T scale = program.anchor_param >= 0 ? static_cast<T>(params[program.anchor_param]) : T(1);
  const int score = program.anchor_operands.size() > 3 ? program.anchor_operands[3] : -1;
  const bool causal = program.anchor_attrs.causal;
  const int64_t offset = ops::causal_offset(program.anchor_attrs, s);  // query i sees j <= i + it
  const QueryInvariantScore split = query_invariant_score(program, launch, score);
  const T factor =
      split.factor >= 0 ? static_cast<T>(params[program.instrs[split.factor].param]) : T(1);
  const int64_t row_blocks = (s.sq + kQueryBlock - 1) / kQueryBlock;
  base::parallel_for(s.batches * row_blocks, 1, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    // A tile of scores is contiguous (row stride = its key count), so the score ops run over
    // it in one evaluator pass and the softmax reads their result where it lies.
    std::vector<T> scores(kQueryBlock * kKeyTile);
    std::vector<T> max(kQueryBlock), sum(kQueryBlock), alpha(kQueryBlock);
    RowMajor<T> acc(kQueryBlock, s.dv), pv(kQueryBlock, s.dv);  // Σ p v, at the running max
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / row_blocks, i0 = (t % row_blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.sq - i0), kvb = s.kv_batch(b);
      const StridedMap<T> qs = block(q, b, i0, rows, s.d);
      const bool direct = reads_rows_in_place(q, k, v, rows);
      std::fill_n(max.begin(), rows, -std::numeric_limits<T>::infinity());
      std::fill_n(sum.begin(), rows, T(0));
      // Keys j <= i + offset: none for a block whose last row is before key 0.
      const int64_t key_end = causal ? std::clamp<int64_t>(i0 + rows + offset, 0, s.sk) : s.sk;
      if (key_end == 0) acc.topRows(rows).setZero();  // no keys: 0 / 0, as the composed form
      for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, key_end - j0);
        T* tile = scores.data();
        if constexpr (std::is_same_v<T, float>) {
          if (direct) direct_scores(q, k, b, i0, kvb, j0, rows, cols, s.d, tile);
        }
        if (!direct) multiply(qs, block(k, kvb, j0, cols, s.d).transpose(), tile, cols);
        if (scale != T(1)) scale_values(tile, rows * cols, scale);
        const T* probs_in = tile;
        if (split.addend >= 0) {  // X of the first query row's keys, added to every row
          if (split.factor >= 0) scale_values(tile, rows * cols, factor);
          ev.run_with_anchor(4, (b * s.sq + i0) * s.sk + j0, cols, tile);
          add_to_rows(tile, ev.values<T>(split.addend), rows, cols);
        } else if (score >= 0 && cols == s.sk) {  // the tile spans every key: rows are contiguous
          ev.run_with_anchor(4, (b * s.sq + i0) * s.sk, rows * cols, tile);
          probs_in = ev.values<T>(score);
        } else if (score >= 0) {
          for (int64_t r = 0; r < rows; ++r) {
            ev.run_with_anchor(4, (b * s.sq + i0 + r) * s.sk + j0, cols, tile + r * cols);
            const T* modified = ev.values<T>(score);
            std::copy(modified, modified + cols, tile + r * cols);
          }
        }
        if (causal) {
          if (probs_in != tile) std::copy(probs_in, probs_in + rows * cols, tile);
          probs_in = tile;
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t first_masked = std::max<int64_t>(0, i0 + r + offset + 1 - j0);
            if (first_masked < cols) {
              std::fill(tile + r * cols + first_masked, tile + (r + 1) * cols,
                        -std::numeric_limits<T>::infinity());
            }
          }
        }
        softmax_tile(probs_in, tile, rows, cols, max.data(), sum.data(), alpha.data());
        const Eigen::Map<const RowMajor<T>> probs(tile, rows, cols);
        const StridedMap<T> vs = block(v, kvb, j0, cols, s.dv);
        // Nothing to rescale in the first tile: P V is the accumulator.
        T* product = j0 == 0 ? acc.data() : pv.data();
        if constexpr (std::is_same_v<T, float>) {
          if (direct) direct_values(tile, v, kvb, j0, rows, cols, s.dv, product);
        }
        if (!direct) multiply(probs, vs, product, s.dv);
        if (j0 == 0) continue;
        for (int64_t r = 0; r < rows; ++r) acc.row(r) = acc.row(r) * alpha[r] + pv.row(r);
      }
      for (int64_t r = 0; r < rows; ++r) {
        // acc is row-major: row r starts at r * dv (acc(r, 0) would assert when dv is 0).
        divide_row(acc.data() + r * s.dv, sum[r], result + (b * s.sq + i0 + r) * s.dv, s.dv);
      }
    }
  });
}

}  // namespace

void run_attention(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const base::Buffer*>& inputs,
                   const std::vector<base::Buffer*>& outputs, const std::vector<double>& params) {
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    if constexpr (std::is_floating_point_v<T>) {
      attention<T>(program, launch, inputs, params, result);
    }
  });
}

}  // namespace kiln::runtime::cpu
