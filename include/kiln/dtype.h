// Element types and devices.
#ifndef KILN_DTYPE_H_
#define KILN_DTYPE_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

namespace kiln {

// The 8- and 16-bit integers and the two OCP 8-bit floats (F8E4M3: 4 exponent bits, 3 mantissa
// bits, NaN but no infinity, largest 448; F8E5M2: 5 and 2, with infinities, largest 57344)
// come after the original seven, so that every earlier dtype keeps its number; then ggml's
// block-quantized storage formats (docs/quantization.md): a tensor of one holds its logical
// shape, whose last axis is a multiple of the block (32 values, or 256 for the K formats).
enum class DType {
  Bool,
  I32,
  I64,
  F16,
  BF16,
  F32,
  F64,
  I8,
  U8,
  I16,
  F8E4M3,
  F8E5M2,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q4_K,
  Q5_K,
  Q6_K
};

// Every element dtype (all but the block formats), in declaration order.
inline constexpr DType kAllDTypes[] = {DType::Bool, DType::I32, DType::I64,    DType::F16,
                                       DType::BF16, DType::F32, DType::F64,    DType::I8,
                                       DType::U8,   DType::I16, DType::F8E4M3, DType::F8E5M2};
// The block-quantized dtypes.
inline constexpr DType kBlockDTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                         DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Bytes one element occupies in memory (Bool, I8, U8 and the 8-bit floats are one byte); 0
// for a block format, whose elements share their block's bytes (use storage_bytes).
int dtype_size(DType dt);
bool is_floating(DType dt);  // F8E4M3, F8E5M2, F16, BF16, F32, F64
bool is_integral(DType dt);  // I8, U8, I16, I32, I64 (not Bool)
bool is_block_quantized(DType dt);
// Values per block: 32 for Q4_0 Q4_1 Q5_0 Q5_1 Q8_0, 256 for Q4_K Q5_K Q6_K, 1 otherwise.
int block_values(DType dt);
// Bytes per block (18 for Q4_0 ... 210 for Q6_K; dtype_size for an element dtype).
int block_bytes(DType dt);
// The bytes `count` elements of `dt` occupy (count a multiple of block_values(dt)).
int64_t storage_bytes(DType dt, int64_t count);
// The trace-file spelling: "bool", "i8", "u8", "i16", "i32", "i64", "f8e4m3", "f8e5m2", "f16",
// "bf16", "f32", "f64", and "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k".
const char* dtype_name(DType dt);
// Inverse of dtype_name; throws kiln::Error for an unknown spelling.
DType dtype_from_name(const std::string& name);
// PyTorch promotion: bool < integers < floating; U8 with I8 gives I16; F16 with BF16 gives
// F32; F8E4M3 with F8E5M2 gives F16 (the narrowest float that holds both exactly). A block
// format promotes with nothing: it is a kiln::Error.
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
// OCP 8-bit floats, stored as their 8 bits. Converting from float rounds to nearest even and
// saturates: a value past the largest finite one, infinities included, becomes that largest
// value with its sign; NaN stays NaN (CUDA's __NV_SATFINITE conversion does the same).
struct Float8E4M3 {
  uint8_t bits = 0;
  Float8E4M3() = default;
  explicit Float8E4M3(float value);
  explicit operator float() const;
};

struct Float8E5M2 {
  uint8_t bits = 0;
  Float8E5M2() = default;
  explicit Float8E5M2(float value);
  explicit operator float() const;
};

namespace fp8_detail {

// The 8-bit float with `kMantissa` mantissa bits and exponent bias `kBias` nearest to `value`
// (ties to even), saturated to the finite encoding `max_bits`; NaN gives `nan_bits`.
template <int kMantissa, int kBias>
inline uint8_t encode(float value, uint32_t max_bits, uint32_t nan_bits) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (f >> 24) & 0x80u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | nan_bits);
  const int exponent = static_cast<int>(abs >> 23) - 127;
  uint32_t bits;
  if (exponent >= 16 + kBias) {  // far past the range (infinity included): saturate
    bits = max_bits;
  } else if (exponent < 1 - kBias) {  // subnormal: whole multiples of 2^(1 - bias - mantissa)
    const float scale =
        std::bit_cast<float>(static_cast<uint32_t>(127 + kBias + kMantissa - 1) << 23);
    bits = static_cast<uint32_t>(std::nearbyint(std::bit_cast<float>(abs) * scale));
  } else {  // normal: 2^mantissa .. 2^(mantissa + 1) steps of this binade, carrying upward
    const float scale =
        std::bit_cast<float>(static_cast<uint32_t>(127 + kMantissa - exponent) << 23);
    const auto steps = static_cast<uint32_t>(std::nearbyint(std::bit_cast<float>(abs) * scale));
    bits = (static_cast<uint32_t>(exponent + kBias) << kMantissa) + steps - (1u << kMantissa);
  }
  return static_cast<uint8_t>(sign | (bits > max_bits ? max_bits : bits));
}

// The float value of 8-bit float `bits`; `kHasInfinity` says whether the all-ones exponent
// holds infinities and NaNs (E5M2) or ordinary values and one NaN pattern (E4M3).
template <int kMantissa, int kBias, bool kHasInfinity>
inline float decode(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t exponent = (bits & 0x7fu) >> kMantissa;
  const uint32_t mantissa = bits & ((1u << kMantissa) - 1u);
  constexpr uint32_t kTopExponent = (0x7fu >> kMantissa);
  if (kHasInfinity ? exponent == kTopExponent : (bits & 0x7fu) == 0x7fu) {
    return std::bit_cast<float>(sign | 0x7f800000u |
                                (mantissa != 0 || !kHasInfinity ? 0x400000u : 0u));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^(1 - bias - mantissa bits)
    const float unit =
        std::bit_cast<float>(static_cast<uint32_t>(127 + 1 - kBias - kMantissa) << 23);
    const float magnitude = static_cast<float>(mantissa) * unit;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent - kBias + 127) << 23) |
                              (mantissa << (23 - kMantissa)));
}

}  // namespace fp8_detail

inline Float8E4M3::Float8E4M3(float value) : bits(fp8_detail::encode<3, 7>(value, 0x7eu, 0x7fu)) {}
inline Float8E4M3::operator float() const { return fp8_detail::decode<3, 7, false>(bits); }
inline Float8E5M2::Float8E5M2(float value) : bits(fp8_detail::encode<2, 15>(value, 0x7bu, 0x7fu)) {}
inline Float8E5M2::operator float() const { return fp8_detail::decode<2, 15, true>(bits); }

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

// The threads the CPU device divides a kernel among, the calling thread included:
// KILN_NUM_THREADS, else the cores this process may use, until set_num_threads sets another
// count (1 to 1024; anything else is a kiln::Error). It applies to kernels launched after the
// call, on every thread.
void set_num_threads(int n);
int num_threads();

}  // namespace kiln

#endif  // KILN_DTYPE_H_
