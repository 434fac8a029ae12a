// scaled_dot_product_attention (kAttention) on the CPU: tasks of one batch·head and a block
// of query rows, on all cores. Per task, key tiles of kKeyTile: the raw scores S = Q Kᵀ ·
// scale (the GEMM core for f32, Eigen for f64), the score ops of space 4 per row (a mask, or a
// hand-written form's own ops), the causal cut, then the online softmax: a running max m and sum l
// per row, the accumulator scaled by exp(m_old - m_new) and P V added (the same GEMM). Only one
// tile of scores exists at a time, so memory never holds the Sq × Sk scores.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/attention.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/matrix_operand.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu/tile_evaluator.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyTile = 128;

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
void exp_in_place(T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    simd_exp(x, x, static_cast<size_t>(n));
  } else {
    for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j]);
  }
}

// A row's max (NaN ignored, as std::max(running, x) does) and sum, each over 8 independent
// lanes: a single running value serializes every step on its latency, and was most of this
// kernel's own time at short sequences.
template <class T>
T row_max(const T* x, int64_t n) {
  T lanes[8];
  std::fill_n(lanes, 8, -std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] < x[j + l] ? x[j + l] : lanes[l];
  }
  for (; j < n; ++j) lanes[0] = lanes[0] < x[j] ? x[j] : lanes[0];
  T m = lanes[0];
  for (int l = 1; l < 8; ++l) m = m < lanes[l] ? lanes[l] : m;
  return m;
}

template <class T>
T row_sum(const T* x, int64_t n) {
  T lanes[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += x[j + l];
  }
  for (; j < n; ++j) lanes[0] += x[j];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// The running softmax state of a block of query rows.
template <class T>
struct OnlineSoftmax {
  std::vector<T> max, sum;
  RowMajor<T> acc;  // Σ p v, scaled to the current max
  OnlineSoftmax(int64_t rows, int64_t dv) : acc(rows, dv) {}
  void reset(int64_t rows) {
    max.assign(rows, -std::numeric_limits<T>::infinity());
    sum.assign(rows, T(0));
    acc.setZero();
  }
  // Turns one row of a tile's scores into probabilities relative to the new running max,
  // and rescales what came before. A row whose scores are all -inf so far keeps a max of
  // -inf and subtracts 0, so no NaN arises before its end (where 0 / 0 gives the composed
  // form's NaN).
  void add_scores(int64_t r, T* scores, int64_t n) {
    const T tile_max = row_max(scores, n);
    const T new_max = std::max(max[r], tile_max);
    const T base = std::isinf(new_max) && new_max < 0 ? T(0) : new_max;
    const T alpha = std::exp(max[r] - base);
    for (int64_t j = 0; j < n; ++j) scores[j] -= base;
    exp_in_place(scores, n);
    const T tile_sum = row_sum(scores, n);
    sum[r] = sum[r] * alpha + tile_sum;
    acc.row(r) *= alpha;
    max[r] = new_max;
  }
};

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

template <class T>
void attention(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
               const std::vector<const Buffer*>& inputs, const std::vector<double>& params,
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
  const int64_t row_blocks = (s.sq + kQueryBlock - 1) / kQueryBlock;
  parallel_for(s.batches * row_blocks, 1, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    RowMajor<T> scores(kQueryBlock, kKeyTile), pv(kQueryBlock, s.dv);
    OnlineSoftmax<T> softmax(kQueryBlock, s.dv);
    std::vector<T> packed_tile;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / row_blocks, i0 = (t % row_blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.sq - i0), kvb = s.kv_batch(b);
      const StridedMap<T> qs = block(q, b, i0, rows, s.d);
      softmax.reset(rows);
      const int64_t key_end = causal ? std::min(s.sk, i0 + rows) : s.sk;  // keys j <= i
      for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, key_end - j0);
        const StridedMap<T> ks = block(k, kvb, j0, cols, s.d);
        const StridedMap<T> vs = block(v, kvb, j0, cols, s.dv);
        auto tile = scores.topLeftCorner(rows, cols);
        multiply(qs, ks.transpose(), scores.data(), kKeyTile);
        tile *= scale;
        // The score ops over the whole tile at once when it spans every key (its rows are
        // then contiguous in space 4): one evaluator pass instead of one per row.
        const bool whole_rows = score >= 0 && cols == s.sk;
        if (whole_rows) {
          packed_tile.resize(rows * cols);
          Eigen::Map<RowMajor<T>>(packed_tile.data(), rows, cols) = tile;
          ev.run_with_anchor(4, (b * s.sq + i0) * s.sk, rows * cols, packed_tile.data());
          tile = Eigen::Map<const RowMajor<T>>(ev.values<T>(score), rows, cols);
        }
        for (int64_t r = 0; r < rows; ++r) {
          T* row = &scores(r, 0);
          const int64_t i = i0 + r;
          if (score >= 0 && !whole_rows) {
            ev.run_with_anchor(4, (b * s.sq + i) * s.sk + j0, cols, row);
            const T* modified = ev.values<T>(score);
            std::copy(modified, modified + cols, row);
          }
          if (causal) {
            for (int64_t j = std::max<int64_t>(0, i + 1 - j0); j < cols; ++j) {
              row[j] = -std::numeric_limits<T>::infinity();
            }
          }
          softmax.add_scores(r, row, cols);
        }
        multiply(Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>(
                     scores.data(), rows, cols, Eigen::OuterStride<>(kKeyTile)),
                 vs, pv.data(), s.dv);
        softmax.acc.topRows(rows) += pv.topRows(rows);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* out = result + (b * s.sq + i0 + r) * s.dv;
        for (int64_t c = 0; c < s.dv; ++c) out[c] = softmax.acc(r, c) / softmax.sum[r];
      }
    }
  });
}

}  // namespace

void run_attention(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                   const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                   const std::vector<double>& params) {
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    if constexpr (std::is_floating_point_v<T>) {
      attention<T>(program, launch, inputs, params, result);
    }
  });
}

}  // namespace kiln::runtime::cpu
