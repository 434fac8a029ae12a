// ggml's block formats, one pair of functions per layout. The arithmetic is ggml's to the
// rounding: f32 products and sums in its order, never fused (CMakeLists.txt compiles this
// file with -ffp-contract=off), scales rounded to f16 to nearest even. The eight formats
// stay in one file of about 600 lines, as in ggml's ggml-quants.c: they share the f16
// rounding, the block loops and the reference searches of the K formats, and a reader
// checking one against ggml finds them side by side.
#include "ops/quantized_blocks.h"

#include <algorithm>
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

// Q4_K (144 bytes per 256): f16 d | f16 dmin | 12 bytes of scales and mins | 128 bytes of
// nibbles. Sub-block j (32 values) is x = (d * scale_j) * q - dmin * min_j, its nibbles in
// bytes 32 * (j / 2) on, low nibbles for even j, high for odd.
void dequantize_q4_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    k_scale_and_min(b + 4, j, scale, min);
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
    k_scale_and_min(b + 4, j, scale, min);
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

// ---- The K formats' quantizers: ggml's reference search for each sub-block's scale (and
// min), in its arithmetic to the rounding. ----

// Round to nearest, ties to even, as ggml's nearest_int does (through the float adder, for
// |v| < 2^22).
int nearest(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

bool any_nan(const float* x, int n) {
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return true;
  }
  return false;
}

// The scale and min (returned negated, as stored: x ≈ scale * L - min) of n values with
// integers L in [0, top], chosen to minimize the weighted squared error: the first guess from
// the range, then nsteps + 1 trial scales around it, each refined by least squares
// (ggml's make_qkx2_quants).
float search_scale_and_min(int n, int top, const float* x, const float* w, uint8_t* L,
                           float* negated_min, float rmin, float rdelta, int nsteps) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *negated_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(top) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(top, l)));
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    best_error += w[i] * diff;
  }
  uint8_t trial[32];
  for (int step = 0; step <= nsteps; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(top)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(top, nearest(iscale * (x[i] - min))));
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * static_cast<float>(l);
      sum_l2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
      sum_xl += w[i] * static_cast<float>(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * trial[i] + this_min - x[i];
        diff = diff * diff;
        error += w[i] * diff;
      }
      if (error < best_error) {
        std::copy_n(trial, n, L);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *negated_min = -min;
  return scale;
}

// Q4_K and Q5_K (top 15 or 31): each sub-block of 32 gets its scale and min by the search
// above, weighted by rms + |x|; the eight of each kind are stored as 6-bit multiples of the
// largest / 63 (d and dmin in f16), and the values requantized against the stored ones.
void quantize_k_scaled(const float* x, uint8_t* b, int top) {
  const bool five = top == 31;
  uint8_t* scales_at = b + 4;
  if (any_nan(x, kSuperBlock)) {
    std::memset(b, 0, five ? 176 : 144);
    put_f16(b, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  uint8_t L[kSuperBlock];
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* v = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += v[l] * v[l];
    const float rms = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = rms + std::fabs(v[l]);
    scales[j] = search_scale_and_min(32, top, v, weights, L + 32 * j, &mins[j],
                                     five ? -0.5f : -1.0f, 0.1f, five ? 15 : 20);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(scales_at, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest(inv_min * mins[j])));
    if (j < 4) {
      scales_at[j] = ls;
      scales_at[j + 4] = lm;
    } else {
      scales_at[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_at[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_at[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  put_f16(b, max_scale / 63.0f);
  put_f16(b + 2, max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    k_scale_and_min(scales_at, j, scale, min);
    const float d = f16_at(b) * static_cast<float>(scale);
    if (d == 0) continue;  // the search's integers stay
    const float dm = f16_at(b + 2) * static_cast<float>(min);
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] =
          static_cast<uint8_t>(std::max(0, std::min(top, nearest((x[32 * j + l] + dm) / d))));
    }
  }
  uint8_t* qs = b + (five ? 48 : 16);
  if (five) std::memset(b + 16, 0, 32);
  for (int j = 0; j < 8; j += 2) {
    for (int l = 0; l < 32; ++l) {
      int low = L[32 * j + l], high = L[32 * j + 32 + l];
      if (five) {
        if (low > 15) {
          low -= 16;
          b[16 + l] |= static_cast<uint8_t>(1 << j);
        }
        if (high > 15) {
          high -= 16;
          b[16 + l] |= static_cast<uint8_t>(2 << j);
        }
      }
      qs[16 * j + l] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

void quantize_q4_k(const float* x, uint8_t* b) { quantize_k_scaled(x, b, 15); }
void quantize_q5_k(const float* x, uint8_t* b) { quantize_k_scaled(x, b, 31); }

// The signed scale of 16 values with integers L + 32 in [0, 63] (L in [-32, 31]), weighted
// by x² : the first guess from the value of largest magnitude, refined by least squares, then
// 18 trial scales around it (ggml's make_qx_quants with rmse_type 1).
float search_symmetric_scale(const float* x, int8_t* L) {
  constexpr int n = 16, top = 32;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto fit = [&](float iscale, float& sum_lx, float& sum_l2, int8_t* out) {
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(-top, std::min(top - 1, nearest(iscale * x[i])));
      if (out != nullptr) out[i] = static_cast<int8_t>(l + top);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  float sum_lx, sum_l2;
  fit(-static_cast<float>(top) / max, sum_lx, sum_l2, L);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    const float iscale = -(static_cast<float>(top) + 0.1f * static_cast<float>(step)) / max;
    fit(iscale, sum_lx, sum_l2, nullptr);
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      fit(iscale, sum_lx, sum_l2, L);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Q6_K: each sub-block of 16 gets a signed scale by the search above; the sixteen are stored
// as int8 multiples of d = (the one of largest magnitude) / -128, and the values requantized.
void quantize_q6_k(const float* x, uint8_t* b) {
  std::memset(b, 0, 210);
  if (any_nan(x, kSuperBlock)) {
    put_f16(b + 208, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  int8_t L[kSuperBlock];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int s = 0; s < 16; ++s) {
    scales[s] = search_symmetric_scale(x + 16 * s, L + 16 * s);
    if (std::fabs(scales[s]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  if (max_abs_scale < 1e-15f) return;  // all zero: d = 0
  auto* stored = reinterpret_cast<int8_t*>(b + 192);
  const float iscale = -128.0f / max_scale;
  put_f16(b + 208, 1 / iscale);
  for (int s = 0; s < 16; ++s) {
    stored[s] = static_cast<int8_t>(std::min(127, nearest(iscale * scales[s])));
  }
  for (int s = 0; s < 16; ++s) {
    const float d = f16_at(b + 208) * static_cast<float>(stored[s]);
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i) {
      L[16 * s + i] =
          static_cast<int8_t>(std::max(-32, std::min(31, nearest(x[16 * s + i] / d))) + 32);
    }
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int h = 0; h < 2; ++h) {
    const int8_t* v = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[64 * h + l] = static_cast<uint8_t>((v[l] & 0xF) | ((v[l + 64] & 0xF) << 4));
      ql[64 * h + 32 + l] = static_cast<uint8_t>((v[l + 32] & 0xF) | ((v[l + 96] & 0xF) << 4));
      qh[32 * h + l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) |
                                            ((v[l + 64] >> 4) << 4) | ((v[l + 96] >> 4) << 6));
    }
  }
}

using Dequantize = void (*)(const uint8_t*, float*);
using Quantize = void (*)(const float*, uint8_t*);

struct Codec {
  Dequantize dequantize;
  Quantize quantize;
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
      return {dequantize_q4_k, quantize_q4_k};
    case DType::Q5_K:
      return {dequantize_q5_k, quantize_q5_k};
    case DType::Q6_K:
      return {dequantize_q6_k, quantize_q6_k};
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

void k_scale_and_min(const uint8_t* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void dequantize_row(DType format, const uint8_t* blocks, float* out, int64_t n) {
  const Codec c = codec(format);
  check_count(format, n, "dequantize_row");
  const int values = block_values(format), bytes = block_bytes(format);
  for (int64_t i = 0; i < n / values; ++i) c.dequantize(blocks + i * bytes, out + i * values);
}

void dequantize_range(DType format, const uint8_t* blocks, int64_t start, int64_t n, float* out) {
  const Codec c = codec(format);
  const int64_t values = block_values(format), bytes = block_bytes(format);
  float block[kMaxBlockValues];
  while (n > 0) {
    const int64_t index = start / values, within = start % values;
    const int64_t take = std::min(n, values - within);
    if (within == 0 && take == values) {
      c.dequantize(blocks + index * bytes, out);
    } else {
      c.dequantize(blocks + index * bytes, block);
      std::copy_n(block + within, take, out);
    }
    start += take;
    out += take;
    n -= take;
  }
}

void quantize_row(DType format, const float* in, uint8_t* blocks, int64_t n) {
  const Codec c = codec(format);
  check_count(format, n, "quantize_row");
  const int values = block_values(format), bytes = block_bytes(format);
  for (int64_t i = 0; i < n / values; ++i) c.quantize(in + i * values, blocks + i * bytes);
}

}  // namespace kiln::ops
