// How the CPU tile evaluator's registers meet buffers: one value converted between dtypes
// under the cast rules, a tile's elements read from a buffer of any dtype into a register of
// class float, double or int64, and register values written back as a store converts them.
// Templates, so that each loop inlines where the evaluator uses it (tile_evaluator.cc,
// tile_loads.cc) and vectorizes there. Private to runtime/cpu.
#ifndef KILN_RUNTIME_CPU_REGISTER_IO_H_
#define KILN_RUNTIME_CPU_REGISTER_IO_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/buffer.h"
#include "kiln/dtype.h"
#include "ops/element_access.h"
#include "ops/quantized_blocks.h"
#include "runtime/cpu/simd_convert.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {

// Rounds a value held in a register to what `dt` can hold.
inline float round_float(DType dt, float v) {
  if (dt == DType::F16) return static_cast<float>(Half(v));
  if (dt == DType::BF16) return static_cast<float>(BFloat16(v));
  if (dt == DType::F8E4M3) return static_cast<float>(Float8E4M3(v));
  if (dt == DType::F8E5M2) return static_cast<float>(Float8E5M2(v));
  return v;
}

// Converts one value between dtypes under the cast rules (docs/semantics.md).
// A 16-bit float value may carry f32 precision inside a kernel; converting it to another
// dtype first rounds it to what it is (as an astype of a stored value would see).
template <class To, class From>
To convert(From v, DType from, DType to) {
  if constexpr (std::is_same_v<From, float>) v = round_float(from, v);
  if constexpr (std::is_same_v<To, int64_t>) {
    if constexpr (std::is_floating_point_v<From>) {
      return saturate_int(to, static_cast<double>(v));
    } else {
      return wrap_int(to, v);
    }
  } else if constexpr (std::is_same_v<To, float>) {
    return round_float(to, static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// Reads n elements of a block-quantized buffer (a quantized weight read by a gather, or by a
// matmul whose view the GEMM's quantized path does not take) into float registers, decoding
// each block when the walk enters it.
template <class T, class Index>
void load_blocks(const base::Buffer& b, DType dt, int64_t n, T* out, Index index) {
  if constexpr (std::is_same_v<T, float>) {
    const int64_t values = block_values(dt);
    float block[ops::kMaxBlockValues];
    int64_t current = -1;
    for (int64_t e = 0; e < n; ++e) {
      const int64_t i = index(e);
      if (i / values != current) {
        current = i / values;
        ops::dequantize_range(dt, b.as<uint8_t>(), current * values, values, block);
      }
      out[e] = block[i % values];
    }
  } else {
    ops::block_element_error(dt);  // lowering reads block dtypes as f32 only
  }
}

// Reads n elements of a buffer of dtype `dt` into a register of class T; element e is at
// offset index(e). One switch per tile; the loop inlines `index`.
template <class T, class Index>
void load_with(const base::Buffer& b, DType dt, int64_t n, T* out, Index index) {
  auto run = [&](auto* src, auto&& to_value) {
    for (int64_t e = 0; e < n; ++e) out[e] = to_value(src[index(e)]);
  };
  switch (dt) {
    case DType::Bool:
      return run(b.as<uint8_t>(), [](uint8_t v) { return static_cast<T>(v != 0); });
    case DType::I8:
      return run(b.as<int8_t>(), [](int8_t v) { return static_cast<T>(v); });
    case DType::U8:
      return run(b.as<uint8_t>(), [](uint8_t v) { return static_cast<T>(v); });
    case DType::I16:
      return run(b.as<int16_t>(), [](int16_t v) { return static_cast<T>(v); });
    case DType::F8E4M3:
      return run(b.as<Float8E4M3>(),
                 [](Float8E4M3 v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::F8E5M2:
      return run(b.as<Float8E5M2>(),
                 [](Float8E5M2 v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::I32:
      return run(b.as<int32_t>(), [](int32_t v) { return static_cast<T>(v); });
    case DType::I64:
      return run(b.as<int64_t>(), [](int64_t v) { return static_cast<T>(v); });
    case DType::F16:
      return run(b.as<Half>(), [](Half v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::BF16:
      return run(b.as<BFloat16>(),
                 [](BFloat16 v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::F32:
      return run(b.as<float>(), [](float v) { return static_cast<T>(v); });
    case DType::F64:
      return run(b.as<double>(), [](double v) { return static_cast<T>(v); });
    default:
      return load_blocks(b, dt, n, out, index);
  }
}

// The dtype whose values a register of class T holds unchanged.
template <class T>
constexpr DType register_dtype() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  if constexpr (std::is_same_v<T, double>) return DType::F64;
  if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
}

// Reads elements [start, start + n) of a buffer: load_with over a contiguous run, or a plain
// copy when the buffer already holds the register's type (f32 into a float register).
template <class T>
void load_run(const base::Buffer& b, DType dt, int64_t start, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (dt == DType::F32) {
      std::memcpy(out, b.as<float>() + start, n * sizeof(float));
      return;
    }
    if (dt == DType::F16) {
      f16_to_floats(b.as<Half>() + start, out, static_cast<size_t>(n));
      return;
    }
    if (is_block_quantized(dt)) {
      ops::dequantize_range(dt, b.as<uint8_t>(), start, n, out);
      return;
    }
  }
  load_with<T>(b, dt, n, out, [start](int64_t e) { return start + e; });
}

// Writes n register values into integers of type Int: floats truncate and saturate, integers
// keep their low bits.
template <class Int, class T>
void store_integers(Int* dst, int64_t n, const T* in) {
  for (int64_t e = 0; e < n; ++e) {
    if constexpr (std::is_floating_point_v<T>) {
      dst[e] = ops::saturate_to<Int>(static_cast<double>(in[e]));
    } else {
      dst[e] = static_cast<Int>(in[e]);
    }
  }
}

// Writes n register values into a buffer of dtype `dt` at [begin, begin + n), converted as
// a store converts them.
template <class T>
void store_values(base::Buffer& b, DType dt, int64_t begin, int64_t n, const T* in) {
  auto run = [&](auto* dst, auto&& convert_one) {
    for (int64_t e = 0; e < n; ++e) dst[begin + e] = convert_one(in[e]);
  };
  switch (dt) {
    case DType::Bool:
      return run(b.as<uint8_t>(), [](T v) -> uint8_t {
        if constexpr (std::is_floating_point_v<T>) return (v != 0 || std::isnan(v)) ? 1 : 0;
        return v != 0;
      });
    case DType::I8:
      return store_integers<int8_t>(b.as<int8_t>() + begin, n, in);
    case DType::U8:
      return store_integers<uint8_t>(b.as<uint8_t>() + begin, n, in);
    case DType::I16:
      return store_integers<int16_t>(b.as<int16_t>() + begin, n, in);
    case DType::I32:
      return store_integers<int32_t>(b.as<int32_t>() + begin, n, in);
    case DType::I64:
      return run(b.as<int64_t>(), [](T v) -> int64_t {
        if constexpr (std::is_floating_point_v<T>) return ops::saturate_to<int64_t>(v);
        return v;
      });
    case DType::F8E4M3:
      return run(b.as<Float8E4M3>(), [](T v) { return Float8E4M3(static_cast<float>(v)); });
    case DType::F8E5M2:
      return run(b.as<Float8E5M2>(), [](T v) { return Float8E5M2(static_cast<float>(v)); });
    case DType::F16:
      if constexpr (std::is_same_v<T, float>) {
        return floats_to_f16(in, b.as<Half>() + begin, static_cast<size_t>(n));
      }
      return run(b.as<Half>(), [](T v) { return Half(static_cast<float>(v)); });
    case DType::BF16:
      if constexpr (std::is_same_v<T, float>) {
        return floats_to_bf16(in, b.as<BFloat16>() + begin, static_cast<size_t>(n));
      }
      return run(b.as<BFloat16>(), [](T v) { return BFloat16(static_cast<float>(v)); });
    case DType::F32:
      if constexpr (std::is_same_v<T, float>) {
        std::memcpy(b.as<float>() + begin, in, n * sizeof(float));
        return;
      }
      return run(b.as<float>(), [](T v) { return static_cast<float>(v); });
    case DType::F64:
      return run(b.as<double>(), [](T v) { return static_cast<double>(v); });
    default:
      ops::block_element_error(dt);
  }
}

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_REGISTER_IO_H_
