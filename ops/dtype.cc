// DType facts, promotion and the 16-bit float conversions.
#include "kiln/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"

namespace kiln {

int dtype_size(DType dt) {
  switch (dt) {
    case DType::Bool:
      return 1;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::F32:
      return 4;
    case DType::I64:
    case DType::F64:
      return 8;
  }
  return 0;
}

bool is_floating(DType dt) {
  return dt == DType::F16 || dt == DType::BF16 || dt == DType::F32 || dt == DType::F64;
}

bool is_integral(DType dt) { return dt == DType::I32 || dt == DType::I64; }

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Bool:
      return "bool";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType dt :
       {DType::Bool, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    if (name == dtype_name(dt)) return dt;
  }
  throw Error(absl::StrCat("unknown dtype '", name,
                           "' (expected one of bool, i32, i64, f16, bf16, f32, f64)"));
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // F16 with BF16: neither holds the other, so both go to F32 (as in PyTorch).
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) {
    return DType::F32;
  }
  auto rank = [](DType dt) {
    switch (dt) {
      case DType::Bool:
        return 0;
      case DType::I32:
        return 1;
      case DType::I64:
        return 2;
      case DType::F16:
      case DType::BF16:
        return 3;
      case DType::F32:
        return 4;
      case DType::F64:
        return 5;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

// IEEE binary16 from float, round to nearest even, with subnormals, infinities and NaN.
Half::Half(float value) {
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

Half::operator float() const {
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

BFloat16::BFloat16(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN
    bits = static_cast<uint16_t>((f >> 16) | 0x40u);
    return;
  }
  uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  bits = static_cast<uint16_t>((f + rounding) >> 16);
}

BFloat16::operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace kiln
