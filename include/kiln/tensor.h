// kiln::Tensor: a cheap, refcounted handle to a lazily recorded value.
//
// Creating a tensor or applying an op only records a node (its shape and dtype are inferred
// and validated at once); nothing is computed until a sync point: to_vector(), item(),
// eval() or kiln::eval(). Copying a Tensor copies the handle, not the data.
#ifndef KILN_TENSOR_H_
#define KILN_TENSOR_H_

#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "kiln/dtype.h"

namespace kiln {

namespace detail {
struct Node;
struct TensorAccess;
// An integer that names one axis: sum(x, 1) and x.sum(1) mean sum(x, {1}). A template, so
// that a braced list such as {} (all axes) still picks the std::vector<int> form.
template <class I>
concept AxisIndex = std::integral<I> && !std::same_as<I, bool>;
}  // namespace detail

// One axis's part of a slice of several axes (Tensor::index): Python's start:stop:step, by
// Tensor::slice's rules. Slice() is the whole axis (":"), Slice(1, -1) is "1:-1".
struct Slice {
  Slice() = default;
  Slice(int64_t first, int64_t end, int64_t stride = 1) : start(first), stop(end), step(stride) {}
  int64_t start = 0;
  int64_t stop = std::numeric_limits<int64_t>::max();
  int64_t step = 1;
};

class Tensor {
 public:
  Tensor() = default;  // an empty handle; every method but defined() throws on it

  // Copies `data` (row-major) into a new tensor of `shape`; the dtype follows T:
  // bool, int8_t, uint8_t, int16_t, int32_t, int64_t, Float8E4M3, Float8E5M2, Half, BFloat16,
  // float, double.
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, std::vector<int64_t> shape);
  // A tensor over the caller's memory, without a copy: `data` holds shape's elements of dt,
  // row-major (bool: one byte, 0 or 1), aligned to the element size, in host memory.
  // - Without a deleter the memory is borrowed: keep it valid, and do not change it, while
  //   the tensor or any pending value computed from it exists (eval() what you need first).
  //   Kiln reads it in place, and writes into it only where the program asks for that:
  //   `t = update_slice(t, values, axis, start)` with no other handle to t writes there.
  // - With a deleter Kiln owns the memory and calls deleter(data) once the last tensor or
  //   kernel that refers to it is done.
  // Values computed from it live in Kiln's own buffers; to_vector() copies out.
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dt,
                          std::function<void(void*)> deleter = {});
  static Tensor full(std::vector<int64_t> shape, double value, DType dt = DType::F32);
  static Tensor zeros(std::vector<int64_t> shape, DType dt = DType::F32);
  static Tensor ones(std::vector<int64_t> shape, DType dt = DType::F32);
  static Tensor arange(int64_t n, DType dt = DType::F32);  // 0, 1, ..., n-1
  // numpy.arange(start, stop, step): start + i * step for i = 0 ... ceil((stop - start) /
  // step) - 1 (none when that is <= 0), computed in double and cast to dt. step != 0.
  static Tensor arange(double start, double stop, double step = 1.0, DType dt = DType::F32);
  // numpy.linspace: num >= 0 values from start to stop, evenly spaced, the last exactly
  // stop (start + i * (stop - start) / (num - 1) in double, cast to dt).
  static Tensor linspace(double start, double stop, int64_t num, DType dt = DType::F32);
  // numpy.eye: an n x m matrix (m = n by default) with ones on diagonal k (k > 0 above the
  // main diagonal, k < 0 below) and zeros elsewhere. Lazy: it fuses into its consumers.
  static Tensor eye(int64_t n, DType dt = DType::F32);
  static Tensor eye(int64_t n, int64_t m, int64_t k = 0, DType dt = DType::F32);
  // Counter-based (Philox-4x32-10) random numbers: one seed gives the same values on every
  // device and every run. rand is uniform in [0, 1); randn is standard normal.
  static Tensor rand(std::vector<int64_t> shape, uint64_t seed, DType dt = DType::F32);
  static Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dt = DType::F32);

  bool defined() const { return node_ != nullptr; }
  const std::vector<int64_t>& shape() const;
  DType dtype() const;
  Device device() const;
  int64_t numel() const;
  int ndim() const;

  // Sync point. T must match dtype() exactly (see from_vector).
  template <class T>
  std::vector<T> to_vector() const;
  double item() const;         // sync point; requires numel() == 1
  const Tensor& eval() const;  // sync point; computes this tensor and keeps the result
  bool is_realized() const;    // true once computed (no pending recipe left)

  Tensor astype(DType dt) const;
  Tensor reshape(std::vector<int64_t> shape) const;  // one -1 allowed
  Tensor permute(std::vector<int> axes) const;
  Tensor transpose(int a, int b) const;
  Tensor broadcast_to(std::vector<int64_t> shape) const;
  Tensor unsqueeze(int axis) const;
  Tensor squeeze(int axis) const;
  // Python-style slice of one axis, x[start:stop:step]: negative start/stop count from the
  // end, then are clamped as Python's slice.indices does. step != 0; a negative step walks
  // backwards from start, and a stop of INT64_MIN (or any stop <= -extent - 1) runs through
  // element 0, so slice(axis, -1, INT64_MIN, -1) is x[::-1] (see kiln::flip). A view: the
  // index math is recorded, nothing is copied.
  Tensor slice(int axis, int64_t start, int64_t stop, int64_t step = 1) const;
  // Slices the first slices.size() axes at once, the rest whole, as libtorch's
  // x.index({Slice(1, -1), Slice()}) and numpy's x[1:-1, :]: the heat equation's interior is
  // u.index({Slice(1, -1), Slice(1, -1)}). A view, like slice.
  Tensor index(const std::vector<Slice>& slices) const;
  // The same values in a row-major buffer of their own once computed: a view (a transpose,
  // a slice) is copied out once instead of being read through strides by every consumer.
  // A computed tensor is already row-major and is returned as is (no copy, no kernel).
  Tensor contiguous() const;

  // The reductions and common math of ops.h as methods: x.sum({1}) is kiln::sum(x, {1}),
  // x.sum(1) the same, x.mean() the mean of every element, x.abs() kiln::abs(x).
  Tensor sum(std::vector<int> axes = {}, bool keepdims = false) const;
  Tensor mean(std::vector<int> axes = {}, bool keepdims = false) const;
  Tensor max(std::vector<int> axes = {}, bool keepdims = false) const;
  Tensor min(std::vector<int> axes = {}, bool keepdims = false) const;
  template <detail::AxisIndex I>
  Tensor sum(I axis, bool keepdims = false) const {
    return sum(std::vector<int>{static_cast<int>(axis)}, keepdims);
  }
  template <detail::AxisIndex I>
  Tensor mean(I axis, bool keepdims = false) const {
    return mean(std::vector<int>{static_cast<int>(axis)}, keepdims);
  }
  template <detail::AxisIndex I>
  Tensor max(I axis, bool keepdims = false) const {
    return max(std::vector<int>{static_cast<int>(axis)}, keepdims);
  }
  template <detail::AxisIndex I>
  Tensor min(I axis, bool keepdims = false) const {
    return min(std::vector<int>{static_cast<int>(axis)}, keepdims);
  }
  Tensor argmax(int axis, bool keepdims = false) const;
  Tensor argmin(int axis, bool keepdims = false) const;
  Tensor abs() const;
  Tensor sqrt() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor square() const;

 private:
  explicit Tensor(std::shared_ptr<detail::Node> node) : node_(std::move(node)) {}
  const detail::Node& node() const;

  std::shared_ptr<detail::Node> node_;

  friend struct detail::TensorAccess;
};

namespace detail {
// Internal access to a tensor's node, for the library's own code (not part of the API).
struct TensorAccess {
  static Tensor wrap(std::shared_ptr<Node> node) { return Tensor(std::move(node)); }
  static const std::shared_ptr<Node>& node(const Tensor& t) { return t.node_; }
};
}  // namespace detail

// One sync point for several outputs: they are planned and computed together.
void eval(const std::vector<Tensor>& outputs);

// Waits until every kernel launched so far has finished. eval() on a GPU returns once the
// kernels are queued; reading data waits by itself. For timing. A no-op on the CPU.
void synchronize();

}  // namespace kiln

#endif  // KILN_TENSOR_H_
