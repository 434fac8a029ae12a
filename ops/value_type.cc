#include "ops/value_type.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ops {

std::string format_shape(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string format_type(const ValueType& type) {
  return absl::StrCat(dtype_name(type.dtype), format_shape(type.shape));
}

absl::Status check_rank(const Shape& shape) {
  if (shape.size() <= static_cast<size_t>(kMaxRank)) return absl::OkStatus();
  // A shape this long is mostly noise in a message: its first dims say which one it is.
  constexpr size_t kShown = 8;
  const Shape head(shape.begin(), shape.begin() + kShown);
  return absl::InvalidArgumentError(absl::StrCat("rank ", shape.size(), " exceeds Kiln's limit of ",
                                                 kMaxRank, " dimensions (shape [",
                                                 absl::StrJoin(head, ", "), ", ...])"));
}

absl::StatusOr<int64_t> checked_numel(const Shape& shape) {
  if (absl::Status s = check_rank(shape); !s.ok()) return s;
  // Bounded so that numel * 8 bytes still fits in int64.
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8;
  // The dims other than zero are bounded together even when a zero makes the count 0: the
  // strides of the shape multiply them (contiguous_strides), and must not overflow.
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", format_shape(shape), " has a negative dimension"));
    }
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > kMaxElements / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", format_shape(shape), " has more elements than fit in memory (overflow)"));
    }
    nonzero *= d;
  }
  return empty ? 0 : nonzero;
}

int64_t numel(const Shape& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

}  // namespace kiln::ops
