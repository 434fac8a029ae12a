// Tensor's reductions and common math as methods: each is the free function of ops.h.
#include <vector>

#include "kiln/ops.h"
#include "kiln/tensor.h"

namespace kiln {

Tensor Tensor::sum(std::vector<int> axes, bool keepdims) const {
  return kiln::sum(*this, std::move(axes), keepdims);
}
Tensor Tensor::mean(std::vector<int> axes, bool keepdims) const {
  return kiln::mean(*this, std::move(axes), keepdims);
}
Tensor Tensor::max(std::vector<int> axes, bool keepdims) const {
  return kiln::max(*this, std::move(axes), keepdims);
}
Tensor Tensor::min(std::vector<int> axes, bool keepdims) const {
  return kiln::min(*this, std::move(axes), keepdims);
}
Tensor Tensor::argmax(int axis, bool keepdims) const { return kiln::argmax(*this, axis, keepdims); }
Tensor Tensor::argmin(int axis, bool keepdims) const { return kiln::argmin(*this, axis, keepdims); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::square() const { return kiln::square(*this); }

}  // namespace kiln
