// The op catalog of the public API. Every op records a node and returns at once; shapes and
// dtypes are checked here, so a bad call throws kiln::Error and records nothing.
//
// Elementwise ops broadcast like numpy. Dtypes promote like PyTorch (bool < integers <
// floating; F16 with BF16 gives F32); a double scalar takes the tensor's dtype instead of
// promoting it, except that a non-integral scalar with an integer or bool tensor gives F32.
#ifndef KILN_OPS_H_
#define KILN_OPS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// Unary elementwise. Math functions (exp ... reciprocal) of integer or bool tensors give F32.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: x * Phi(x), as PyTorch's default
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor square(const Tensor& x);
Tensor logical_not(const Tensor& x);  // Bool
Tensor log1p(const Tensor& x);        // log(1 + x), accurate for small x
Tensor expm1(const Tensor& x);        // exp(x) - 1, accurate for small x

// Binary elementwise with broadcasting. Integer div gives F32; comparisons give Bool.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);  // NaN propagates
Tensor minimum(const Tensor& a, const Tensor& b);  // NaN propagates
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);

// Scalar forms: the scalar becomes a 0-d constant of the tensor's dtype (see above).
Tensor scalar_like(const Tensor& like, double value);
Tensor pow(const Tensor& a, double b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);

// Picks a where cond is true, else b; cond must be Bool; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// numpy.clip: minimum(maximum(x, lo), hi), so lo > hi gives hi everywhere and NaN in x
// stays NaN. The tensor form broadcasts all three.
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);

// Reductions; axes empty = all axes; negative axes count from the end. sum of Bool/I32
// gives I64; mean needs a floating dtype; max/min of an empty extent is an error.
Tensor sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
// One axis as an integer: sum(x, 1) is sum(x, {1}); sum(x, {}) still sums every axis.
template <detail::AxisIndex I>
Tensor sum(const Tensor& x, I axis, bool keepdims = false) {
  return sum(x, std::vector<int>{static_cast<int>(axis)}, keepdims);
}
template <detail::AxisIndex I>
Tensor mean(const Tensor& x, I axis, bool keepdims = false) {
  return mean(x, std::vector<int>{static_cast<int>(axis)}, keepdims);
}
template <detail::AxisIndex I>
Tensor max(const Tensor& x, I axis, bool keepdims = false) {
  return max(x, std::vector<int>{static_cast<int>(axis)}, keepdims);
}
template <detail::AxisIndex I>
Tensor min(const Tensor& x, I axis, bool keepdims = false) {
  return min(x, std::vector<int>{static_cast<int>(axis)}, keepdims);
}
// Index (I64) of the first largest/smallest element along axis; NaN counts as largest.
Tensor argmax(const Tensor& x, int axis, bool keepdims = false);
Tensor argmin(const Tensor& x, int axis, bool keepdims = false);

// Running sum along axis (negative counts from the end), x's shape: y[i] = x[0] + ... + x[i].
// ONNX CumSum's options: exclusive leaves element i out (y[i] = x[0] + ... + x[i-1], y[0] = 0);
// reverse sums from the end (y[i] = x[i] + ... + x[n-1]); both give y[i] = x[i+1] + ... +
// x[n-1], y[n-1] = 0. A floating x keeps its dtype; integers and bool sum in I64 (numpy,
// PyTorch).
Tensor cumsum(const Tensor& x, int axis, bool exclusive = false, bool reverse = false);

// numpy.flip: x with the order of elements along each of `axes` reversed (axes empty = all
// axes; negative axes count from the end; an axis named twice is an error). A view, recorded
// as backward slices (Tensor::slice with step -1), so it fuses into its consumers.
Tensor flip(const Tensor& x, std::vector<int> axes = {});

// numpy.pad with a constant: widths[d] = {before, after} elements of `value` around dim d,
// one pair for each dim of x, none negative. Recorded as concat with constants.
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& widths,
           double value = 0.0);
// numpy.roll: elements shifted by `shift` along axis, those past the end coming back at
// the start (a negative shift moves them the other way; any shift, modulo the extent).
// Without an axis x is rolled as if flattened. Recorded as concat of two slices.
Tensor roll(const Tensor& x, int64_t shift, int axis);
Tensor roll(const Tensor& x, int64_t shift);
// The vector norm over axes (empty = all), as numpy.linalg.norm of a flattened x and
// torch.linalg.vector_norm: ord 2 (default) sqrt(sum(x^2)), 1 sum(|x|), INFINITY max(|x|),
// -INFINITY min(|x|), 0 the count of nonzeros, any other p sum(|x|^p)^(1/p). Integer and
// bool x are taken as F32; the result has x's floating dtype.
Tensor norm(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, double ord = 2.0);
// The inner product of two 1-D tensors of equal length (numpy.dot of vectors): a 0-d
// tensor, sum(a * b), so it fuses with the producers of a and b.
Tensor dot(const Tensor& a, const Tensor& b);

// numpy matmul: 1-D operands are promoted to matrices and the added dim removed after;
// batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// Joins tensors of equal rank along axis; other dims must match; dtypes promote.
Tensor concat(const std::vector<Tensor>& tensors, int axis);

// Indexing (numpy semantics). Indices are I32 or I64; a negative index counts from the end.
// An out-of-range index is a kiln::Error at the sync that names the op, the index and the
// extent; nothing is read out of range. Both fuse into their consumers like a load.
// take: shape x.shape[:axis] + indices.shape + x.shape[axis+1:], x's dtype.
Tensor take(const Tensor& x, const Tensor& indices, int axis);
// take_along_axis: indices has x's rank, its other dims broadcast against x's; the result
// picks, along axis, the elements indices names (as after argsort or topk).
Tensor take_along_axis(const Tensor& x, const Tensor& indices, int axis);
// The k largest elements along axis (the k smallest when !largest), in order, and their
// positions (I64): values equals take_along_axis(x, indices, axis). Equal values come in
// order of position; NaN counts as larger than every number (as PyTorch's topk). x is
// numeric (not bool) of rank >= 1; 0 <= k <= x.shape[axis]. Both have x's shape with the
// axis's extent replaced by k.
struct TopK {
  Tensor values;
  Tensor indices;
};
TopK topk(const Tensor& x, int64_t k, int axis = -1, bool largest = true);

// x with x[start : start + update.shape[axis]] along axis replaced by update (cast to x's
// dtype): a KV cache write. update has x's rank and x's other dims; axis may be negative;
// the range must lie inside x (0 <= start <= extent - update's extent), else kiln::Error.
// x itself is not changed: the result is a new tensor.
Tensor update_slice(const Tensor& x, const Tensor& update, int axis, int64_t start);
// The same with a start that is a tensor (as XLA's dynamic_update_slice): one I32 or I64
// value, read when the kernel runs. A compiled step (kiln::compile) that takes the position
// as an input then writes where each call says, where an integer start would be a constant
// of its recording. A start outside x is a kiln::Error at the sync that names it.
Tensor update_slice(const Tensor& x, const Tensor& update, int axis, const Tensor& start);
// x with the region [starts, starts + update's shape) replaced by update (cast to x's
// dtype): numpy's `x[1:-1, 1:-1] = update`, as a value. update has x's rank and fits inside
// x from starts (one per dim), else kiln::Error. Written in place when nothing else holds x
// (docs/fusion.md): a loop that swaps two grids, `next = update_slice(next, f(u), {1, 1});
// std::swap(u, next);`, writes only the interior each step.
Tensor update_slice(const Tensor& x, const Tensor& update, const std::vector<int64_t>& starts);
// x with source's slices added along axis at the positions index names (PyTorch's
// index_add): for l = 0, 1, ..., L - 1, out[..., index[l], ...] += source[..., l, ...].
// index is one dim of L I32 or I64 values, negative ones counting from the end (as take);
// source has x's rank, L along axis and x's other dims, and is cast to x's dtype (numeric,
// not bool). Repeated indices add up, in the order of l on the CPU (the result does not
// depend on the thread count) and in any order on a GPU (float sums may differ there in
// their last bits). An index out of range is a kiln::Error at the sync that names it.
Tensor index_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source);
// TensorFlow's unsorted_segment_sum: out[s, ...] sums data[i, ...] over the i whose
// segment_ids[i] is s (zero where none is). segment_ids is one dim of I32 or I64 values,
// one per row of data, in [0, num_segments) (negative ones count from the end, as in
// index_add); the result has shape [num_segments] + data.shape[1:] and data's dtype (bool
// data counts, as I64).
Tensor segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);
// numpy's bincount with a fixed length: out[v] counts the elements of x equal to v (I64), or
// sums their weights (weights: one per element of x; the result has weights' dtype). x is
// one dim of I32 or I64 values in [0, length) (negative ones count from the end).
Tensor bincount(const Tensor& x, int64_t length);
Tensor bincount(const Tensor& x, const Tensor& weights, int64_t length);
// x[start : start + length] along axis, with a start that is a tensor (as XLA's
// dynamic_slice): one I32 or I64 value, read when the kernel runs, so a compiled step reads
// where each call says. 0 <= length <= x's extent; a start outside [0, extent - length] is a
// kiln::Error at the sync that reads it (never wrapped or clamped). Trace files call it
// dynamic_slice; it fuses into its consumers like take.
Tensor slice(const Tensor& x, int axis, const Tensor& start, int64_t length);

// The lower (tril) or upper (triu) triangle of the last two dims, the rest set to zero:
// tril keeps x[..., i, j] where j - i <= k, triu where j - i >= k (k = 0: the diagonal; as
// numpy and PyTorch). x needs rank >= 2; dtype and shape are kept. They compose from a
// position mask and where, so they fuse into their consumers (trace files show those ops).
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor operator==(double a, const Tensor& b);
Tensor operator!=(double a, const Tensor& b);
Tensor operator<(double a, const Tensor& b);
Tensor operator<=(double a, const Tensor& b);
Tensor operator>(double a, const Tensor& b);
Tensor operator>=(double a, const Tensor& b);

// Compound assignment rebinds the handle: `x += y` is `x = x + y`, a new lazy value (dtypes
// promote as in x + y, so x's dtype may change). Tensors are values: any other handle to
// x's old value keeps that value, and nothing is written into its buffer.
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, double b);
Tensor& operator-=(Tensor& a, double b);
Tensor& operator*=(Tensor& a, double b);
Tensor& operator/=(Tensor& a, double b);

}  // namespace kiln

#endif  // KILN_OPS_H_
