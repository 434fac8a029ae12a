#include "jit/api/block_views.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/graph/node.h"
#include "jit/graph/record.h"
#include "kiln/error.h"
#include "ops/value_type.h"

namespace kiln::jit {
namespace {

// For each row of a slice of x (rows along the last axis), the row of x it is.
std::vector<int64_t> sliced_rows(const ops::Shape& x, const ops::Shape& out,
                                 const ops::Attrs& attrs) {
  const int leading = static_cast<int>(x.size()) - 1;
  const std::vector<int64_t> x_strides =
      ops::contiguous_strides(ops::Shape(x.begin(), x.end() - 1));
  const int64_t rows = ops::numel(ops::Shape(out.begin(), out.end() - 1));
  std::vector<int64_t> source(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, at = 0;
    for (int d = leading - 1; d >= 0; --d) {
      int64_t i = rest % out[d];
      rest /= out[d];
      if (d == attrs.axis) i = attrs.start + i * attrs.step;
      at += i * x_strides[d];
    }
    source[r] = at;
  }
  return source;
}

// `bytes` bytes of x's buffer from `offset`, as a buffer that keeps x's alive.
std::shared_ptr<base::Buffer> byte_range(const std::shared_ptr<base::Buffer>& buffer,
                                         int64_t offset, int64_t bytes) {
  auto keep = [buffer] {};
  if (buffer->on_device()) {
    return std::make_shared<base::Buffer>(bytes, buffer->device(),
                                          buffer->device_pointer() + offset, keep);
  }
  return std::make_shared<base::Buffer>(buffer->data() + offset, bytes, keep);
}

}  // namespace

std::optional<Tensor> block_row_view(const Tensor& x, ops::OpKind op, ops::Attrs attrs) {
  const ops::ValueType type = check_op(op, {x}, attrs);
  const std::shared_ptr<detail::Node>& node = detail::TensorAccess::node(x);
  if (!node->realized()) return std::nullopt;
  // A stored block tensor holds its blocks along its last axis: views keep whole rows.
  const int last = x.ndim() - 1;
  const bool cuts_rows =
      op == ops::OpKind::Slice ? attrs.axis == last : type.shape.back() != x.shape().back();
  if (cuts_rows) {
    throw Error(absl::StrCat(
        "[", ops::op_name(op), "] ", ops::format_type(node->type),
        ": a block-quantized tensor holds its blocks along its last axis, so its views keep "
        "whole rows (slice another axis, reshape the leading ones): astype "
        "it to f32, f16 or bf16 first"));
  }
  if (op == ops::OpKind::Reshape) return make_realized(type, node->buffer, x.device());
  const int64_t row_bytes = storage_bytes(x.dtype(), x.shape().back());
  const std::vector<int64_t> rows = sliced_rows(x.shape(), type.shape, attrs);
  bool together = true;
  for (size_t r = 1; r < rows.size() && together; ++r) together = rows[r] == rows[0] + int64_t(r);
  if (rows.empty() || together) {
    const int64_t first = rows.empty() ? 0 : rows[0];
    return make_realized(
        type,
        byte_range(node->buffer, first * row_bytes, static_cast<int64_t>(rows.size()) * row_bytes),
        x.device());
  }
  const std::shared_ptr<const base::Buffer> source = host_view(node->buffer);
  auto copy = std::make_shared<base::Buffer>(static_cast<int64_t>(rows.size()) * row_bytes);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::memcpy(copy->data() + r * row_bytes, source->data() + rows[r] * row_bytes, row_bytes);
  }
  return realized_on(type, copy, x.device());
}

}  // namespace kiln::jit
