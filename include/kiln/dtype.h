// Element types and devices.
#ifndef KILN_DTYPE_H_
#define KILN_DTYPE_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

namespace kiln {

enum class DType { Bool, I32, I64, F16, BF16, F32, F64 };

// Bytes one element occupies in memory (Bool is one byte; F16 and BF16 are two).
int dtype_size(DType dt);
bool is_floating(DType dt);
bool is_integral(DType dt);  // I32, I64 (not Bool)
// The trace-file spelling: "bool", "i32", "i64", "f16", "bf16", "f32", "f64".
const char* dtype_name(DType dt);
// Inverse of dtype_name; throws kiln::Error for an unknown spelling.
DType dtype_from_name(const std::string& name);
// PyTorch promotion: bool < integers < floating; F16 with BF16 gives F32.
DType promote_types(DType a, DType b);

// IEEE binary16, stored as its 16 bits. Converts to and from float with round-to-nearest-even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float value);
  explicit operator float() const;
};

// bfloat16 (the upper half of an F32), stored as its 16 bits; round-to-nearest-even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value);
  explicit operator float() const;
};

// The conversions are inline so that loops over 16-bit data vectorize (an out-of-line call
// per element made bf16 kernels ten times slower than f32 ones).
// IEEE binary16 from float, round to nearest even, with subnormals, infinities and NaN.
inline Half::Half(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to infinity
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Scale so the subnormal's integer mantissa is the rounded value of |x| * 2^24.
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // exact: power of two
    bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
    return;
  }
  uint32_t mantissa_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mantissa_odd;  // rebias exponent (-112 << 23) and round to nearest even
  bits = static_cast<uint16_t>(sign | (abs >> 13));
}

inline Half::operator float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline BFloat16::BFloat16(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN
    bits = static_cast<uint16_t>((f >> 16) | 0x40u);
    return;
  }
  uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  bits = static_cast<uint16_t>((f + rounding) >> 16);
}

inline BFloat16::operator float() const {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

std::string device_name(Device d);  // "cpu", "cuda:0"

// KILN_DEVICE=cpu|cuda|cuda:N|auto (default auto: CUDA if usable, else CPU). Asking for CUDA where
// none is usable throws kiln::Error.
Device default_device();
void set_default_device(Device d);

}  // namespace kiln

#endif  // KILN_DTYPE_H_
