// ggml's block formats, one pair of functions per layout. The arithmetic is ggml's to the
// rounding: f32 products and sums in its order, never fused (CMakeLists.txt compiles this
// file with -ffp-contract=off), scales rounded to f16 to nearest even.
#include "ops/quantized_blocks.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kiln/dtype.h"

namespace kiln::ops {
namespace {

constexpr int kBlock = 32;        // values per block of the 32-value formats
constexpr int kSuperBlock = 256;  // values per super-block of the K formats

float f16_at(const uint8_t* p) {
  Half h;
  std::memcpy(&h.bits, p, 2);
  return static_cast<float>(h);
}

void put_f16(uint8_t* p, float v) {
  const Half h(v);
  std::memcpy(p, &h.bits, 2);
}

// The integer a quantizer stores for `scaled` (a value already scaled and offset into
// [0, top + 0.5]): truncated, clamped to [0, top]; NaN gives 0.
uint8_t clamp_trunc(float scaled, int top) {
  const float t = std::trunc(scaled);
  if (!(t > 0)) return 0;
  return t >= static_cast<float>(top) ? static_cast<uint8_t>(top) : static_cast<uint8_t>(t);
}

// 1 / d, or 0 where d is 0 (an all-zero block).
float inverse(float d) { return d != 0 ? 1.0f / d : 0.0f; }

// The value of largest magnitude, the first of equals, starting from +0 as ggml does (so an
// all-zero block of -0 gives +0); NaN if any value is NaN.
float signed_extreme(const float* x) {
  float best = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (std::isnan(x[j])) return x[j];
    if (std::fabs(best) < std::fabs(x[j])) best = x[j];
  }
  return best;
}

// The block's minimum and maximum by ggml's comparisons (the first of equal zeros wins);
// both NaN if any value is NaN.
void min_max(const float* x, float& low, float& high) {
  low = std::numeric_limits<float>::max();
  high = -std::numeric_limits<float>::max();
  for (int j = 0; j < kBlock; ++j) {
    if (std::isnan(x[j])) {
      low = high = x[j];
      return;
    }
    if (x[j] < low) low = x[j];
    if (x[j] > high) high = x[j];
  }
}

// Q4_0 (18 bytes): f16 d | 16 bytes, value j in the low nibble of byte j and value j + 16 in
// its high nibble; x = d * (q - 8), d = -(the value of largest magnitude) / 8.
void quantize_q4_0(const float* x, uint8_t* b) {
  const float d = signed_extreme(x) / -8.0f;
  const float id = inverse(d);
  put_f16(b, d);
  for (int j = 0; j < kBlock / 2; ++j) {
    const uint8_t lo = clamp_trunc(x[j] * id + 8.5f, 15);
    const uint8_t hi = clamp_trunc(x[j + 16] * id + 8.5f, 15);
    b[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_q4_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < kBlock / 2; ++j) {
    y[j] = d * static_cast<float>((b[2 + j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
  }
}

// Q4_1 (20 bytes): f16 d | f16 m | nibbles as Q4_0; x = d * q + m, m the minimum.
void quantize_q4_1(const float* x, uint8_t* b) {
  float low, high;
  min_max(x, low, high);
  const float d = (high - low) / 15.0f;
  const float id = inverse(d);
  put_f16(b, d);
  put_f16(b + 2, low);
  for (int j = 0; j < kBlock / 2; ++j) {
    const uint8_t lo = clamp_trunc((x[j] - low) * id + 0.5f, 15);
    const uint8_t hi = clamp_trunc((x[j + 16] - low) * id + 0.5f, 15);
    b[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_q4_1(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  for (int j = 0; j < kBlock / 2; ++j) {
    y[j] = d * static_cast<float>(b[4 + j] & 0xF) + m;
    y[j + 16] = d * static_cast<float>(b[4 + j] >> 4) + m;
  }
}

// The fifth bits of 32 five-bit integers, bit j of a little-endian u32.
uint32_t high_bits_of(const uint8_t* q) {
  uint32_t h = 0;
  for (int j = 0; j < kBlock; ++j) h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  return h;
}

// The five-bit values of a Q5 block: low nibbles as Q4_0, fifth bits from `qh`.
void five_bit_values(const uint8_t* qs, uint32_t qh, int* q) {
  for (int j = 0; j < kBlock / 2; ++j) {
    q[j] = (qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
  }
}

// Q5_0 (22 bytes): f16 d | u32 fifth bits | nibbles; x = d * (q - 16).
void quantize_q5_0(const float* x, uint8_t* b) {
  const float d = signed_extreme(x) / -16.0f;
  const float id = inverse(d);
  uint8_t q[kBlock];
  for (int j = 0; j < kBlock; ++j) q[j] = clamp_trunc(x[j] * id + 16.5f, 31);
  put_f16(b, d);
  const uint32_t qh = high_bits_of(q);
  std::memcpy(b + 2, &qh, 4);
  for (int j = 0; j < kBlock / 2; ++j) {
    b[6 + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  }
}

void dequantize_q5_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  int q[kBlock];
  five_bit_values(b + 6, qh, q);
  for (int j = 0; j < kBlock; ++j) y[j] = d * static_cast<float>(q[j] - 16);
}

// Q5_1 (24 bytes): f16 d | f16 m | u32 fifth bits | nibbles; x = d * q + m.
void quantize_q5_1(const float* x, uint8_t* b) {
  float low, high;
  min_max(x, low, high);
  const float d = (high - low) / 31.0f;
  const float id = inverse(d);
  uint8_t q[kBlock];
  for (int j = 0; j < kBlock; ++j) q[j] = clamp_trunc((x[j] - low) * id + 0.5f, 31);
  put_f16(b, d);
  put_f16(b + 2, low);
  const uint32_t qh = high_bits_of(q);
  std::memcpy(b + 4, &qh, 4);
  for (int j = 0; j < kBlock / 2; ++j) {
    b[8 + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  }
}

void dequantize_q5_1(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  int q[kBlock];
  five_bit_values(b + 8, qh, q);
  for (int j = 0; j < kBlock; ++j) y[j] = d * static_cast<float>(q[j]) + m;
}

// Q8_0 (34 bytes): f16 d | 32 int8; x = d * q, d = max |x| / 127, q rounded half away from
// zero.
void quantize_q8_0(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < kBlock; ++j) {
    if (std::isnan(x[j])) {
      amax = x[j];
      break;
    }
    amax = std::fmax(amax, std::fabs(x[j]));
  }
  const float d = amax / 127.0f;
  const float id = inverse(d);
  put_f16(b, d);
  for (int j = 0; j < kBlock; ++j) {
    const float r = std::round(x[j] * id);
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::isnan(r) ? 0.0f : r));
  }
}

void dequantize_q8_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < kBlock; ++j) {
    y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
  }
}

// The 6-bit scale and min of sub-block j (0 to 7) of Q4_K and Q5_K, packed in 12 bytes:
// bytes 0-3 and 4-7 hold sub-blocks 0-3's scales and mins in their low 6 bits; sub-blocks
// 4-7 take their low 4 bits from bytes 8-11 and their high 2 bits from the top of 0-7.
void scale_and_min(const uint8_t* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K (144 bytes per 256): f16 d | f16 dmin | 12 bytes of scales and mins | 128 bytes of
// nibbles. Sub-block j (32 values) is x = (d * scale_j) * q - dmin * min_j, its nibbles in
// bytes 32 * (j / 2) on, low nibbles for even j, high for odd.
void dequantize_q4_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    scale_and_min(b + 4, j, scale, min);
    const float d1 = d * static_cast<float>(scale), m1 = dmin * static_cast<float>(min);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      y[32 * j + l] = d1 * static_cast<float>((q[l] >> shift) & 0xF) - m1;
    }
  }
}

// Q5_K (176 bytes per 256): as Q4_K with 32 bytes of fifth bits before the nibbles: value l
// of sub-block j takes bit j of byte l.
void dequantize_q5_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    scale_and_min(b + 4, j, scale, min);
    const float d1 = d * static_cast<float>(scale), m1 = dmin * static_cast<float>(min);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0xF) | (((qh[l] >> j) & 1) << 4);
      y[32 * j + l] = d1 * static_cast<float>(v) - m1;
    }
  }
}

// Q6_K (210 bytes per 256): 128 bytes of low nibbles | 64 bytes of high 2-bit pairs | 16
// int8 scales | f16 d. Each half h of 128 values: value 32 g + l (g = 0..3) takes nibble
// g / 2 of byte 64 h + 32 (g % 2) + l and bits 2 g of byte 32 h + l; x = (d * scale) * (q - 32)
// with the scale of its 16 values.
void dequantize_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int i = 128 * h + 32 * g + l;
        const int low = (ql[64 * h + 32 * (g % 2) + l] >> (4 * (g / 2))) & 0xF;
        const int high = (qh[32 * h + l] >> (2 * g)) & 3;
        const int8_t scale = scales[i / 16];  // each scale covers 16 values
        y[i] = d * static_cast<float>(scale) * static_cast<float>((low | (high << 4)) - 32);
      }
    }
  }
}

using Dequantize = void (*)(const uint8_t*, float*);
using Quantize = void (*)(const float*, uint8_t*);

struct Codec {
  Dequantize dequantize;
  Quantize quantize;  // null where not written yet
};

Codec codec(DType format) {
  switch (format) {
    case DType::Q4_0:
      return {dequantize_q4_0, quantize_q4_0};
    case DType::Q4_1:
      return {dequantize_q4_1, quantize_q4_1};
    case DType::Q5_0:
      return {dequantize_q5_0, quantize_q5_0};
    case DType::Q5_1:
      return {dequantize_q5_1, quantize_q5_1};
    case DType::Q8_0:
      return {dequantize_q8_0, quantize_q8_0};
    case DType::Q4_K:
      return {dequantize_q4_k, nullptr};
    case DType::Q5_K:
      return {dequantize_q5_k, nullptr};
    case DType::Q6_K:
      return {dequantize_q6_k, nullptr};
    default:
      throw std::invalid_argument(std::string("internal error: ") + dtype_name(format) +
                                  " is not a block format");
  }
}

void check_count(DType format, int64_t n, const char* what) {
  if (n % block_values(format) != 0) {
    throw std::invalid_argument(std::string("internal error: ") + what + " of " +
                                std::to_string(n) + " values in " + dtype_name(format) +
                                " blocks of " + std::to_string(block_values(format)));
  }
}

}  // namespace

bool can_quantize(DType format) {
  return is_block_quantized(format) && codec(format).quantize != nullptr;
}

void dequantize_row(DType format, const uint8_t* blocks, float* out, int64_t n) {
  const Codec c = codec(format);
  check_count(format, n, "dequantize_row");
  const int values = block_values(format), bytes = block_bytes(format);
  for (int64_t i = 0; i < n / values; ++i) c.dequantize(blocks + i * bytes, out + i * values);
}

void quantize_row(DType format, const float* in, uint8_t* blocks, int64_t n) {
  const Codec c = codec(format);
  check_count(format, n, "quantize_row");
  if (c.quantize == nullptr) {
    throw std::invalid_argument(std::string("internal error: no quantizer for ") +
                                dtype_name(format));
  }
  const int values = block_values(format), bytes = block_bytes(format);
  for (int64_t i = 0; i < n / values; ++i) c.quantize(in + i * values, blocks + i * bytes);
}

}  // namespace kiln::ops
