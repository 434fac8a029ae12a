// Reading and writing one element of a buffer of any dtype, in the reference evaluator's two
// compute domains: double (floating) and int64 (integers and bool).
//
// Conversions follow one documented rule (docs/semantics.md): float to integer truncates
// toward zero and saturates at the type's range, NaN becomes 0; anything to bool is != 0
// (NaN is true); an integer to a narrower integer keeps the low bits (two's complement).
#ifndef KILN_OPS_ELEMENT_ACCESS_H_
#define KILN_OPS_ELEMENT_ACCESS_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "kiln/dtype.h"

namespace kiln::ops {

// Block-quantized dtypes have no element of their own to read or write: no op takes them
// (ops/infer.cc), and astype converts whole blocks (jit/api/block_astype.cc).
[[noreturn]] inline void block_element_error(DType dt) {
  throw std::logic_error(std::string("internal error: an element of ") + dtype_name(dt) +
                         " read or written one at a time");
}

inline double load_double(const base::Buffer& b, DType dt, int64_t i) {
  switch (dt) {
    case DType::Bool:
      return b.as<uint8_t>()[i] != 0 ? 1.0 : 0.0;
    case DType::I8:
      return b.as<int8_t>()[i];
    case DType::U8:
      return b.as<uint8_t>()[i];
    case DType::I16:
      return b.as<int16_t>()[i];
    case DType::F8E4M3:
      return static_cast<float>(b.as<Float8E4M3>()[i]);
    case DType::F8E5M2:
      return static_cast<float>(b.as<Float8E5M2>()[i]);
    case DType::I32:
      return b.as<int32_t>()[i];
    case DType::I64:
      return static_cast<double>(b.as<int64_t>()[i]);
    case DType::F16:
      return static_cast<float>(b.as<Half>()[i]);
    case DType::BF16:
      return static_cast<float>(b.as<BFloat16>()[i]);
    case DType::F32:
      return b.as<float>()[i];
    case DType::F64:
      return b.as<double>()[i];
    default:
      block_element_error(dt);
  }
}

template <class Int>
Int saturate_to(double v) {
  if (std::isnan(v)) return 0;
  // Compare in double against bounds that are exactly representable: the minimum and one
  // past the maximum (2^63 for int64, whose maximum a double does not hold).
  constexpr double kLow = static_cast<double>(std::numeric_limits<Int>::min());
  // max / 2 + 1 is 2^(bits - 2) exactly: the integer division is meant.
  // NOLINTNEXTLINE(bugprone-integer-division)
  constexpr double kHigh = static_cast<double>(std::numeric_limits<Int>::max() / 2 + 1) * 2.0;
  if (v <= kLow) return std::numeric_limits<Int>::min();
  if (v >= kHigh) return std::numeric_limits<Int>::max();
  return static_cast<Int>(v);
}

inline int64_t load_int(const base::Buffer& b, DType dt, int64_t i) {
  switch (dt) {
    case DType::Bool:
      return b.as<uint8_t>()[i] != 0;
    case DType::I8:
      return b.as<int8_t>()[i];
    case DType::U8:
      return b.as<uint8_t>()[i];
    case DType::I16:
      return b.as<int16_t>()[i];
    case DType::I32:
      return b.as<int32_t>()[i];
    case DType::I64:
      return b.as<int64_t>()[i];
    default:
      return saturate_to<int64_t>(load_double(b, dt, i));
  }
}

inline bool load_truth(const base::Buffer& b, DType dt, int64_t i) {
  if (is_floating(dt)) return load_double(b, dt, i) != 0.0 || std::isnan(load_double(b, dt, i));
  return load_int(b, dt, i) != 0;
}

inline void store_double(base::Buffer& b, DType dt, int64_t i, double v) {
  switch (dt) {
    case DType::Bool:
      b.as<uint8_t>()[i] = (v != 0.0 || std::isnan(v)) ? 1 : 0;
      return;
    case DType::I8:
      b.as<int8_t>()[i] = saturate_to<int8_t>(v);
      return;
    case DType::U8:
      b.as<uint8_t>()[i] = saturate_to<uint8_t>(v);
      return;
    case DType::I16:
      b.as<int16_t>()[i] = saturate_to<int16_t>(v);
      return;
    case DType::I32:
      b.as<int32_t>()[i] = saturate_to<int32_t>(v);
      return;
    case DType::I64:
      b.as<int64_t>()[i] = saturate_to<int64_t>(v);
      return;
    case DType::F8E4M3:
      b.as<Float8E4M3>()[i] = Float8E4M3(static_cast<float>(v));
      return;
    case DType::F8E5M2:
      b.as<Float8E5M2>()[i] = Float8E5M2(static_cast<float>(v));
      return;
    case DType::F16:
      b.as<Half>()[i] = Half(static_cast<float>(v));
      return;
    case DType::BF16:
      b.as<BFloat16>()[i] = BFloat16(static_cast<float>(v));
      return;
    case DType::F32:
      b.as<float>()[i] = static_cast<float>(v);
      return;
    case DType::F64:
      b.as<double>()[i] = v;
      return;
    default:
      block_element_error(dt);
  }
}

inline void store_int(base::Buffer& b, DType dt, int64_t i, int64_t v) {
  switch (dt) {
    case DType::Bool:
      b.as<uint8_t>()[i] = v != 0;
      return;
    case DType::I8:  // the narrower integers keep the low bits
      b.as<int8_t>()[i] = static_cast<int8_t>(v);
      return;
    case DType::U8:
      b.as<uint8_t>()[i] = static_cast<uint8_t>(v);
      return;
    case DType::I16:
      b.as<int16_t>()[i] = static_cast<int16_t>(v);
      return;
    case DType::I32:
      b.as<int32_t>()[i] = static_cast<int32_t>(v);  // keeps the low 32 bits
      return;
    case DType::I64:
      b.as<int64_t>()[i] = v;
      return;
    default:
      store_double(b, dt, i, static_cast<double>(v));
      return;
  }
}

// Copies element src[i] (dtype from) to dst[j] (dtype to) under the cast rules.
inline void convert_element(const base::Buffer& src, DType from, int64_t i, base::Buffer& dst,
                            DType to, int64_t j) {
  if (is_floating(from)) {
    store_double(dst, to, j, load_double(src, from, i));
  } else {
    store_int(dst, to, j, load_int(src, from, i));
  }
}

// Where the rows along `axis` of a row-major `shape` lie: (outer, extent, inner), element k
// of row (o, i) at at(o, k, i). For row-wise loops.
struct RowLayout {
  int64_t outer = 1, extent = 1, inner = 1;
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * extent + k) * inner + i; }
};
inline RowLayout row_layout(const std::vector<int64_t>& shape, int axis) {
  RowLayout r;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < axis) r.outer *= shape[d];
    if (d == axis) r.extent = shape[d];
    if (d > axis) r.inner *= shape[d];
  }
  return r;
}

}  // namespace kiln::ops

#endif  // KILN_OPS_ELEMENT_ACCESS_H_
