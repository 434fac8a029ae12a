#include "jit/api/block_astype.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/graph/node.h"
#include "kiln/error.h"
#include "ops/quantized_blocks.h"
#include "ops/value_type.h"

namespace kiln::jit {
namespace {

// x's bytes on the host (x realized first).
std::shared_ptr<const base::Buffer> host_bytes(const Tensor& x) {
  x.eval();
  return host_view(detail::TensorAccess::node(x)->buffer);
}

// x (block-quantized, and so always realized) dequantized to f32, on x's device.
Tensor dequantized(const Tensor& x) {
  const std::shared_ptr<const base::Buffer> blocks = host_bytes(x);
  auto out = std::make_shared<base::Buffer>(x.numel() * 4);
  ops::dequantize_row(x.dtype(), blocks->as<uint8_t>(), out->as<float>(), x.numel());
  return realized_on({x.shape(), DType::F32}, out, x.device());
}

Tensor quantized(const Tensor& x, DType to) {
  const std::string what =
      absl::StrCat("[astype] x is ", ops::format_type({x.shape(), x.dtype()}), ": ");
  const int values = block_values(to);
  if (x.ndim() == 0 || x.shape().back() % values != 0) {
    throw Error(absl::StrCat(what, dtype_name(to), " stores rows of whole blocks of ", values,
                             " values, so the last axis must be a multiple of ", values));
  }
  const Tensor source = is_block_quantized(x.dtype()) ? dequantized(x) : x.astype(DType::F32);
  const std::shared_ptr<const base::Buffer> floats = host_bytes(source);
  auto out = std::make_shared<base::Buffer>(storage_bytes(to, x.numel()));
  ops::quantize_row(to, floats->as<float>(), out->as<uint8_t>(), x.numel());
  return realized_on({x.shape(), to}, out, x.device());
}

}  // namespace

Tensor block_astype(const Tensor& x, DType to) {
  if (!x.defined()) throw Error("[astype] the tensor is empty (undefined)");
  if (x.dtype() == to) return x;
  if (is_block_quantized(to)) return quantized(x, to);
  const Tensor f32 = dequantized(x);
  return to == DType::F32 ? f32 : f32.astype(to);
}

}  // namespace kiln::jit
