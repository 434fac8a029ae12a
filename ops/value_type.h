// What inference knows of a value before it is computed: its shape and dtype.
#ifndef KILN_OPS_VALUE_TYPE_H_
#define KILN_OPS_VALUE_TYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/dtype.h"

namespace kiln::ops {

using Shape = std::vector<int64_t>;

struct ValueType {
  Shape shape;
  DType dtype = DType::F32;
};

std::string format_shape(const Shape& shape);    // "[2, 3]"
std::string format_type(const ValueType& type);  // "f32[2, 3]"
// Element count, or an error when a dim is negative or the count overflows int64 (or the
// byte size of the largest dtype would).
absl::StatusOr<int64_t> checked_numel(const Shape& shape);
int64_t numel(const Shape& shape);  // for shapes already checked
// Row-major strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

}  // namespace kiln::ops

#endif  // KILN_OPS_VALUE_TYPE_H_
