// kiln::Tensor's own methods: metadata, data in and out, and sync points.
#include "kiln/tensor.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/eval/sync.h"
#include "jit/graph/node.h"
#include "kiln/error.h"
#include "ops/element_access.h"

namespace kiln {
namespace {

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  if constexpr (std::is_same_v<T, int8_t>) return DType::I8;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::U8;
  if constexpr (std::is_same_v<T, int16_t>) return DType::I16;
  if constexpr (std::is_same_v<T, Float8E4M3>) return DType::F8E4M3;
  if constexpr (std::is_same_v<T, Float8E5M2>) return DType::F8E5M2;
  if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  if constexpr (std::is_same_v<T, Half>) return DType::F16;
  if constexpr (std::is_same_v<T, BFloat16>) return DType::BF16;
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  if constexpr (std::is_same_v<T, double>) return DType::F64;
}

}  // namespace

const detail::Node& Tensor::node() const {
  if (node_ == nullptr) throw Error("this Tensor is empty (default-constructed); assign it first");
  return *node_;
}

const std::vector<int64_t>& Tensor::shape() const { return node().type.shape; }
DType Tensor::dtype() const { return node().type.dtype; }
Device Tensor::device() const { return node().device; }
int64_t Tensor::numel() const { return ops::numel(node().type.shape); }
int Tensor::ndim() const { return static_cast<int>(node().type.shape.size()); }
bool Tensor::is_realized() const { return node().realized(); }

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& data, std::vector<int64_t> shape) {
  constexpr DType dt = dtype_of<T>();
  absl::StatusOr<int64_t> count = ops::checked_numel(shape);
  if (!count.ok()) throw Error(absl::StrCat("[from_vector] ", count.status().message()));
  if (*count != static_cast<int64_t>(data.size())) {
    throw Error(absl::StrCat("[from_vector] shape ", ops::format_shape(shape), " needs ", *count,
                             " elements but the vector has ", data.size()));
  }
  auto buffer = std::make_shared<base::Buffer>(*count * dtype_size(dt));
  if constexpr (std::is_same_v<T, bool>) {
    for (int64_t i = 0; i < *count; ++i) buffer->as<uint8_t>()[i] = data[i] ? 1 : 0;
  } else if (*count > 0) {
    std::memcpy(buffer->data(), data.data(), data.size() * sizeof(T));
  }
  return jit::realized_on({std::move(shape), dt}, buffer, default_device());
}

Tensor Tensor::from_blob(void* data, std::vector<int64_t> shape, DType dt,
                         std::function<void(void*)> deleter) {
  absl::StatusOr<int64_t> count = ops::checked_numel(shape);
  if (!count.ok()) throw Error(absl::StrCat("[from_blob] ", count.status().message()));
  const auto address = reinterpret_cast<uintptr_t>(data);
  if (data == nullptr && *count > 0) {
    throw Error(absl::StrCat("[from_blob] data is null for ", dtype_name(dt),
                             ops::format_shape(shape), " (expected ", *count, " elements)"));
  }
  const int values = block_values(dt);
  if (values > 1 && (shape.empty() || shape.back() % values != 0)) {
    throw Error(absl::StrCat("[from_blob] ", dtype_name(dt), ops::format_shape(shape),
                             ": the last axis must hold whole blocks of ", values, " values"));
  }
  if (address % std::max(1, dtype_size(dt)) != 0) {
    throw Error(absl::StrCat("[from_blob] data at 0x", absl::Hex(address), " is not aligned to ",
                             dtype_size(dt), " bytes, the size of ", dtype_name(dt),
                             " (copy it with from_vector instead)"));
  }
  std::function<void()> release;
  if (deleter) release = [deleter = std::move(deleter), data] { deleter(data); };
  auto buffer = std::make_shared<base::Buffer>(static_cast<std::byte*>(data),
                                               storage_bytes(dt, *count), std::move(release));
  return jit::realized_on({std::move(shape), dt}, buffer, default_device());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  constexpr DType dt = dtype_of<T>();
  if (dtype() != dt) {
    throw Error(absl::StrCat("[to_vector] element type ", dtype_name(dt),
                             " does not match the tensor's dtype ", ops::format_type(node().type),
                             " (use astype first)"));
  }
  eval();
  const std::shared_ptr<const base::Buffer> host = jit::host_view(node().buffer);
  const base::Buffer& buffer = *host;
  const int64_t n = numel();
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<bool> out(n);
    for (int64_t i = 0; i < n; ++i) out[i] = buffer.as<uint8_t>()[i] != 0;
    return out;
  } else {
    return std::vector<T>(buffer.as<T>(), buffer.as<T>() + n);
  }
}

double Tensor::item() const {
  if (numel() != 1) {
    throw Error(
        absl::StrCat("[item] needs exactly one element, got ", ops::format_type(node().type)));
  }
  // One element copied to the host and read under the cast rules, whatever its dtype.
  eval();
  const std::shared_ptr<const base::Buffer> host = jit::host_view(node().buffer);
  return ops::load_double(*host, dtype(), 0);
}

const Tensor& Tensor::eval() const {
  node();  // throws on an empty handle
  jit::sync({node_.get()});
  return *this;
}

void synchronize() { jit::synchronize_all_devices(); }

void eval(const std::vector<Tensor>& outputs) {
  std::vector<detail::Node*> nodes;
  for (const Tensor& t : outputs) {
    if (!t.defined()) throw Error("[eval] an output tensor is empty (undefined)");
    nodes.push_back(detail::TensorAccess::node(t).get());
  }
  jit::sync(nodes);
}

#define KILN_INSTANTIATE_DATA(T)                                                       \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, std::vector<int64_t>); \
  template std::vector<T> Tensor::to_vector<T>() const;
KILN_INSTANTIATE_DATA(bool)
KILN_INSTANTIATE_DATA(int8_t)
KILN_INSTANTIATE_DATA(uint8_t)
KILN_INSTANTIATE_DATA(int16_t)
KILN_INSTANTIATE_DATA(int32_t)
KILN_INSTANTIATE_DATA(int64_t)
KILN_INSTANTIATE_DATA(Half)
KILN_INSTANTIATE_DATA(BFloat16)
KILN_INSTANTIATE_DATA(Float8E4M3)
KILN_INSTANTIATE_DATA(Float8E5M2)
KILN_INSTANTIATE_DATA(float)
KILN_INSTANTIATE_DATA(double)
#undef KILN_INSTANTIATE_DATA

}  // namespace kiln
