// kiln::Tensor: a cheap, refcounted handle to a lazily recorded value.
//
// Creating a tensor or applying an op only records a node (its shape and dtype are inferred
// and validated at once); nothing is computed until a sync point: to_vector(), item(),
// eval() or kiln::eval(). Copying a Tensor copies the handle, not the data.
#ifndef KILN_TENSOR_H_
#define KILN_TENSOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/dtype.h"

namespace kiln {

namespace detail {
struct Node;
struct TensorAccess;
}  // namespace detail

class Tensor {
 public:
  Tensor() = default;  // an empty handle; every method but defined() throws on it

  // Copies `data` (row-major) into a new tensor of `shape`; the dtype follows T:
  // bool, int32_t, int64_t, Half, BFloat16, float, double.
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, std::vector<int64_t> shape);
  static Tensor full(std::vector<int64_t> shape, double value, DType dt = DType::F32);
  static Tensor zeros(std::vector<int64_t> shape, DType dt = DType::F32);
  static Tensor ones(std::vector<int64_t> shape, DType dt = DType::F32);
  static Tensor arange(int64_t n, DType dt = DType::F32);  // 0, 1, ..., n-1
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
  // The same values in a row-major buffer of their own once computed: a view (a transpose,
  // a slice) is copied out once instead of being read through strides by every consumer.
  // A computed tensor is already row-major and is returned as is (no copy, no kernel).
  Tensor contiguous() const;

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
