// Activation rounding, the portable tile kernel and the choice of kernel by CPU
// (quantized_dot.h). The SIMD kernels are in quantized_dot_simd.inc.
#include "runtime/cpu/quantized_dot.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/dtype.h"
#include "ops/quantized_blocks.h"

namespace kiln::runtime::cpu {
#if defined(__x86_64__)
namespace avx2 {
void dot_tile(const DotTile& t);
void quantize_activations(const float* a, int64_t k, ActivationBlock* out);
}  // namespace avx2
namespace avx512_vnni {
void dot_tile(const DotTile& t);
void panel_tile(const PanelTile& t);
int panel_columns();
}  // namespace avx512_vnni
namespace avx_vnni {
void dot_tile(const DotTile& t);
void panel_tile(const PanelTile& t);
int panel_columns();
}  // namespace avx_vnni
#endif

namespace {

// One chunk of 32 weights: w = dw * q[i] * scale[i / 16] + mw.
struct Chunk {
  int q[32];
  int scale[2] = {1, 1};
  float dw = 0, mw = 0;
};

float f16_at(const uint8_t* p) {
  Half h;
  std::memcpy(&h.bits, p, 2);
  return static_cast<float>(h);
}

// A byte read as two's complement int8.
int signed_byte(uint8_t b) { return b < 128 ? b : b - 256; }

void nibbles_16(const uint8_t* p, int* q) {
  for (int i = 0; i < 16; ++i) {
    q[i] = p[i] & 0xF;
    q[i + 16] = p[i] >> 4;
  }
}

int fifth_bit(const uint8_t* bits, int i) { return ((bits[i / 8] >> (i % 8)) & 1) << 4; }

Chunk chunk_at(DType format, const uint8_t* row, int64_t c) {
  Chunk k;
  switch (format) {
    case DType::Q4_0: {
      const uint8_t* p = row + c * 18;
      nibbles_16(p + 2, k.q);
      for (int& q : k.q) q -= 8;
      k.dw = f16_at(p);
      break;
    }
    case DType::Q4_1: {
      const uint8_t* p = row + c * 20;
      nibbles_16(p + 4, k.q);
      k.dw = f16_at(p);
      k.mw = f16_at(p + 2);
      break;
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      const bool with_min = format == DType::Q5_1;
      const uint8_t* p = row + c * (with_min ? 24 : 22);
      const uint8_t* bits = p + (with_min ? 4 : 2);
      nibbles_16(bits + 4, k.q);
      for (int i = 0; i < 32; ++i) k.q[i] = (k.q[i] | fifth_bit(bits, i)) - (with_min ? 0 : 16);
      k.dw = f16_at(p);
      if (with_min) k.mw = f16_at(p + 2);
      break;
    }
    case DType::Q8_0: {
      const uint8_t* p = row + c * 34;
      for (int i = 0; i < 32; ++i) k.q[i] = signed_byte(p[2 + i]);
      k.dw = f16_at(p);
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = format == DType::Q5_K;
      const uint8_t* b = row + (c / 8) * (five ? 176 : 144);
      const int j = static_cast<int>(c % 8);
      int scale, min;
      ops::k_scale_and_min(b + 4, j, scale, min);
      k.dw = f16_at(b) * static_cast<float>(scale);
      k.mw = -(f16_at(b + 2) * static_cast<float>(min));
      const uint8_t* q = b + (five ? 48 : 16) + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        k.q[l] = (q[l] >> (4 * (j % 2))) & 0xF;
        if (five) k.q[l] |= ((b[16 + l] >> j) & 1) << 4;
      }
      break;
    }
    default: {  // Q6_K
      const uint8_t* b = row + (c / 8) * 210;
      const int v = static_cast<int>(c % 8), h = v / 4, g = v % 4;
      for (int l = 0; l < 32; ++l) {
        const int low = (b[64 * h + 32 * (g % 2) + l] >> (4 * (g / 2))) & 0xF;
        const int high = (b[128 + 32 * h + l] >> (2 * g)) & 3;
        k.q[l] = (low | (high << 4)) - 32;
      }
      k.dw = f16_at(b + 208);
      k.scale[0] = signed_byte(b[192 + 2 * v]);
      k.scale[1] = signed_byte(b[193 + 2 * v]);
    }
  }
  return k;
}

void portable_tile(const DotTile& t) {
  const int64_t chunks = t.k / 32;
  for (int r = 0; r < t.rows; ++r) {
    for (int j = 0; j < t.cols; ++j) {
      float acc = 0, minimum = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        const Chunk w = chunk_at(t.format, t.w + j * t.w_stride, c);
        const ActivationBlock& a = t.a[r * t.a_stride + c];
        int dot[2] = {0, 0};
        for (int i = 0; i < 32; ++i) dot[i / 16] += w.q[i] * a.q[i];
        const int scaled = dot[0] * w.scale[0] + dot[1] * w.scale[1];
        acc += static_cast<float>(scaled) * (w.dw * a.d);
        minimum += w.mw * a.dsum;
      }
      t.c[r * t.ldc + j] = acc + minimum;
    }
  }
}

#if defined(__x86_64__)
// F16C (CPUID leaf 1, ECX bit 29), which not every compiler's __builtin_cpu_supports names.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

// AVX-VNNI (CPUID leaf 7, subleaf 1, EAX bit 4), likewise.
bool has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 4)) != 0;
}
#endif

}  // namespace

void quantize_activations_portable(const float* a, int64_t k, ActivationBlock* out) {
  // Loops the compiler vectorizes: no library call per value. Rounding to nearest even by
  // adding and subtracting 1.5 · 2^23 is exact for the |v| <= 127.5 found here.
  constexpr float kRound = 12582912.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* x = a + 32 * b;
    float amax = 0, probe = 0;
    for (int i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(x[i]));
      probe += x[i] * 0.0f;  // NaN when any value is NaN or infinite
    }
    ActivationBlock& block = out[b];
    if (probe != 0.0f) {  // NaN or infinity: the products with this block are NaN
      block = ActivationBlock{};
      block.d = block.dsum = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float d = amax / 127.0f;
    const float inverse = d != 0 ? 1.0f / d : 0.0f;
    // Below about 4e-37, d is subnormal and 1 / d overflows: scale by the largest value first.
    const bool tiny = std::isinf(inverse);
    int32_t q[32];
    for (int i = 0; i < 32; ++i) {
      const float scaled = tiny ? x[i] / amax * 127.0f : x[i] * inverse;
      const float rounded = (scaled + kRound) - kRound;
      q[i] = std::clamp(static_cast<int32_t>(rounded), -127, 127);
    }
    int sum[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      block.q[i] = static_cast<int8_t>(q[i]);
      sum[i / 16] += q[i];
    }
    block.d = d;
    block.dsum = d * static_cast<float>(sum[0] + sum[1]);
    block.sum_low = sum[0];
    block.sum_high = sum[1];
  }
}

void quantize_activations(const float* a, int64_t k, ActivationBlock* out) {
#if defined(__x86_64__)
  static const bool simd = dot_tile_avx2() != nullptr;
  if (simd) return avx2::quantize_activations(a, k, out);
#endif
  quantize_activations_portable(a, k, out);
}

DotTileKernel dot_tile_portable() { return portable_tile; }

DotTileKernel dot_tile_avx2() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()) {
    return avx2::dot_tile;
  }
#endif
  return nullptr;
}

DotTileKernel dot_tile_avx512_vnni() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("fma") && has_f16c()) {
    return avx512_vnni::dot_tile;
  }
#endif
  return nullptr;
}

DotTileKernel dot_tile_avx_vnni() {
#if defined(__x86_64__)
  if (dot_tile_avx2() != nullptr && has_avx_vnni()) return avx_vnni::dot_tile;
#endif
  return nullptr;
}

PanelKernel panel_kernel_avx512_vnni() {
#if defined(__x86_64__)
  if (dot_tile_avx512_vnni() != nullptr)
    return {avx512_vnni::panel_tile, avx512_vnni::panel_columns()};
#endif
  return {};
}

PanelKernel panel_kernel_avx_vnni() {
#if defined(__x86_64__)
  if (dot_tile_avx_vnni() != nullptr) return {avx_vnni::panel_tile, avx_vnni::panel_columns()};
#endif
  return {};
}

PanelKernel panel_kernel() {
  static const PanelKernel chosen = [] {
    if (PanelKernel k = panel_kernel_avx512_vnni(); k.run != nullptr) return k;
    return panel_kernel_avx_vnni();
  }();
  return chosen;
}

DotTileKernel dot_tile_kernel() {
  static const DotTileKernel chosen = [] {
    if (DotTileKernel k = dot_tile_avx512_vnni()) return k;
    if (DotTileKernel k = dot_tile_avx_vnni()) return k;
    if (DotTileKernel k = dot_tile_avx2()) return k;
    return dot_tile_portable();
  }();
  return chosen;
}

}  // namespace kiln::runtime::cpu
