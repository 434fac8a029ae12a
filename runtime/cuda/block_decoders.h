// Device functions that decode one value of a block-quantized weight (ggml's layouts,
// docs/quantization.md), for kernels that read such a tensor element by element: a gather
// of embedding rows, or a matmul operand. The same arithmetic as ops/quantized_blocks.cc
// (NVRTC compiles without FMA contraction), so a value decodes to the CPU's bits. A module
// carries them only when one of its inputs is block-quantized.
#ifndef KILN_RUNTIME_CUDA_BLOCK_DECODERS_H_
#define KILN_RUNTIME_CUDA_BLOCK_DECODERS_H_

namespace kiln::runtime::cuda {

inline constexpr const char* kBlockDecodersSource = R"CUDA(
// ---- block-quantized weights: value i of a tensor stored as blocks from b ----
__device__ __forceinline__ float kiln_f16_at(const unsigned char* p) {
  return f16_to_f32((unsigned short)(p[0] | (p[1] << 8)));
}
// Q4_0 (18 bytes / 32): f16 d | 16 bytes of nibbles, value j < 16 low, j >= 16 high.
__device__ __forceinline__ float dequantize_q4_0(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 5) * 18;
  const int j = (int)(i & 31);
  const int q = (p[2 + (j & 15)] >> ((j >> 4) * 4)) & 0xF;
  return kiln_f16_at(p) * (float)(q - 8);
}
// Q4_1 (20 bytes): f16 d | f16 m | nibbles as Q4_0.
__device__ __forceinline__ float dequantize_q4_1(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 5) * 20;
  const int j = (int)(i & 31);
  const int q = (p[4 + (j & 15)] >> ((j >> 4) * 4)) & 0xF;
  return kiln_f16_at(p) * (float)q + kiln_f16_at(p + 2);
}
// The fifth bit of value j from the 32 bits stored little-endian at qh.
__device__ __forceinline__ int kiln_fifth_bit(const unsigned char* qh, int j) {
  return ((qh[j >> 3] >> (j & 7)) & 1) << 4;
}
// Q5_0 (22 bytes): f16 d | 32 fifth bits | nibbles.
__device__ __forceinline__ float dequantize_q5_0(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 5) * 22;
  const int j = (int)(i & 31);
  const int q = ((p[6 + (j & 15)] >> ((j >> 4) * 4)) & 0xF) | kiln_fifth_bit(p + 2, j);
  return kiln_f16_at(p) * (float)(q - 16);
}
// Q5_1 (24 bytes): f16 d | f16 m | 32 fifth bits | nibbles.
__device__ __forceinline__ float dequantize_q5_1(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 5) * 24;
  const int j = (int)(i & 31);
  const int q = ((p[8 + (j & 15)] >> ((j >> 4) * 4)) & 0xF) | kiln_fifth_bit(p + 4, j);
  return kiln_f16_at(p) * (float)q + kiln_f16_at(p + 2);
}
// Q8_0 (34 bytes): f16 d | 32 int8.
__device__ __forceinline__ float dequantize_q8_0(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 5) * 34;
  return (float)(signed char)p[2 + (i & 31)] * kiln_f16_at(p);
}
// The 6-bit scale and min of sub-block j of Q4_K and Q5_K (ggml's get_scale_min_k4).
__device__ __forceinline__ void kiln_scale_min_k4(const unsigned char* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
// Q4_K (144 bytes / 256): f16 d | f16 dmin | 12 bytes of scales | nibbles; sub-block j of 32
// values is (d * scale_j) * q - dmin * min_j.
__device__ __forceinline__ float dequantize_q4_k(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 8) * 144;
  const int v = (int)(i & 255), j = v >> 5, l = v & 31;
  int scale, min;
  kiln_scale_min_k4(p + 4, j, scale, min);
  const int q = (p[16 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xF;
  return kiln_f16_at(p) * (float)scale * (float)q - kiln_f16_at(p + 2) * (float)min;
}
// Q5_K (176 bytes / 256): as Q4_K with 32 bytes of fifth bits (bit j of byte l) before the
// nibbles.
__device__ __forceinline__ float dequantize_q5_k(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 8) * 176;
  const int v = (int)(i & 255), j = v >> 5, l = v & 31;
  int scale, min;
  kiln_scale_min_k4(p + 4, j, scale, min);
  const int q = ((p[48 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xF) | (((p[16 + l] >> j) & 1) << 4);
  return kiln_f16_at(p) * (float)scale * (float)q - kiln_f16_at(p + 2) * (float)min;
}
// Q6_K (210 bytes / 256): 128 bytes of low nibbles | 64 of high bit pairs | 16 int8 scales |
// f16 d; x = (d * scale) * (q - 32), a scale per 16 values.
__device__ __forceinline__ float dequantize_q6_k(const unsigned char* b, i64 i) {
  const unsigned char* p = b + (i >> 8) * 210;
  const int v = (int)(i & 255), h = v >> 7, g = (v >> 5) & 3, l = v & 31;
  const int low = (p[64 * h + 32 * (g & 1) + l] >> (4 * (g >> 1))) & 0xF;
  const int high = (p[128 + 32 * h + l] >> (2 * g)) & 3;
  const float scale = (float)(signed char)p[192 + (v >> 4)];
  return kiln_f16_at(p + 208) * scale * (float)((low | (high << 4)) - 32);
}

// ---- block-quantized weights for integer dot products: 32 values at a time ----
// Sub-block j (32 values) of a chunk of 256 values (8 blocks of 32, or one super-block) as
// the quantized matrix product multiplies it (render_quantized_matmul.cc): u[i] holds values
// 4i .. 4i + 3 as unsigned bytes, and value v = dw * s * (u - offset) + mw, with s = s_low for
// values 0-15 and s_high for 16-31 (Q6_K's two int8 scales; 1 elsewhere). The chunk lies in
// shared memory at a 2-byte-aligned address (every block size and field offset is even).
struct BlockDot {
  unsigned u[8];
  float dw, mw;
  int offset, s_low, s_high;
};
__device__ __forceinline__ unsigned kiln_u32_at(const unsigned char* p) {
  const unsigned short* h = (const unsigned short*)p;
  return (unsigned)h[0] | ((unsigned)h[1] << 16);
}
// Bits 0-3 of x, each moved to bit 4 of its own byte: four values' fifth bits.
__device__ __forceinline__ unsigned kiln_fifth_bits(unsigned x) {
  return ((x & 1u) | ((x & 2u) << 7) | ((x & 4u) << 14) | ((x & 8u) << 21)) << 4;
}
// The 16 nibbles of a 32-block (value i low, i + 16 high) at q.
__device__ __forceinline__ void kiln_nibbles(const unsigned char* q, BlockDot& b) {
  for (int i = 0; i < 4; ++i) {
    const unsigned w = kiln_u32_at(q + 4 * i);
    b.u[i] = w & 0x0F0F0F0Fu;
    b.u[4 + i] = (w >> 4) & 0x0F0F0F0Fu;
  }
}
__device__ __forceinline__ void kiln_add_fifth_bits(unsigned qh, BlockDot& b) {
  for (int i = 0; i < 4; ++i) {
    b.u[i] |= kiln_fifth_bits(qh >> (4 * i));
    b.u[4 + i] |= kiln_fifth_bits(qh >> (16 + 4 * i));
  }
}
__device__ __forceinline__ BlockDot block_dot_q4_0(const unsigned char* chunk, int j) {
  const unsigned char* p = chunk + 18 * j;
  BlockDot b{{}, kiln_f16_at(p), 0.0f, 8, 1, 1};
  kiln_nibbles(p + 2, b);
  return b;
}
__device__ __forceinline__ BlockDot block_dot_q4_1(const unsigned char* chunk, int j) {
  const unsigned char* p = chunk + 20 * j;
  BlockDot b{{}, kiln_f16_at(p), kiln_f16_at(p + 2), 0, 1, 1};
  kiln_nibbles(p + 4, b);
  return b;
}
__device__ __forceinline__ BlockDot block_dot_q5_0(const unsigned char* chunk, int j) {
  const unsigned char* p = chunk + 22 * j;
  BlockDot b{{}, kiln_f16_at(p), 0.0f, 16, 1, 1};
  kiln_nibbles(p + 6, b);
  kiln_add_fifth_bits(kiln_u32_at(p + 2), b);
  return b;
}
__device__ __forceinline__ BlockDot block_dot_q5_1(const unsigned char* chunk, int j) {
  const unsigned char* p = chunk + 24 * j;
  BlockDot b{{}, kiln_f16_at(p), kiln_f16_at(p + 2), 0, 1, 1};
  kiln_nibbles(p + 8, b);
  kiln_add_fifth_bits(kiln_u32_at(p + 4), b);
  return b;
}
// Q8_0's signed bytes offset by 128 to unsigned ones (flipping each sign bit).
__device__ __forceinline__ BlockDot block_dot_q8_0(const unsigned char* chunk, int j) {
  const unsigned char* p = chunk + 34 * j;
  BlockDot b{{}, kiln_f16_at(p), 0.0f, 128, 1, 1};
  for (int i = 0; i < 8; ++i) b.u[i] = kiln_u32_at(p + 2 + 4 * i) ^ 0x80808080u;
  return b;
}
// Q4_K and Q5_K: sub-block j's nibbles are the low (j even) or high half of 32 bytes.
__device__ __forceinline__ BlockDot block_dot_k4(const unsigned char* p, const unsigned char* qs,
                                                 int j) {
  int scale, min;
  kiln_scale_min_k4(p + 4, j, scale, min);
  BlockDot b{{}, kiln_f16_at(p) * (float)scale, -(kiln_f16_at(p + 2) * (float)min), 0, 1, 1};
  for (int i = 0; i < 8; ++i) b.u[i] = (kiln_u32_at(qs + 4 * i) >> (4 * (j & 1))) & 0x0F0F0F0Fu;
  return b;
}
__device__ __forceinline__ BlockDot block_dot_q4_k(const unsigned char* chunk, int j) {
  return block_dot_k4(chunk, chunk + 16 + 32 * (j >> 1), j);
}
__device__ __forceinline__ BlockDot block_dot_q5_k(const unsigned char* chunk, int j) {
  BlockDot b = block_dot_k4(chunk, chunk + 48 + 32 * (j >> 1), j);
  for (int i = 0; i < 8; ++i) b.u[i] |= ((kiln_u32_at(chunk + 16 + 4 * i) >> j) & 0x01010101u) << 4;
  return b;
}
__device__ __forceinline__ BlockDot block_dot_q6_k(const unsigned char* chunk, int j) {
  const int h = j >> 2, g = j & 3;
  const unsigned char* low = chunk + 64 * h + 32 * (g & 1);
  const unsigned char* high = chunk + 128 + 32 * h;
  BlockDot b{{}, kiln_f16_at(chunk + 208), 0.0f, 32, (int)(signed char)chunk[192 + 2 * j],
             (int)(signed char)chunk[193 + 2 * j]};
  for (int i = 0; i < 8; ++i) {
    b.u[i] = ((kiln_u32_at(low + 4 * i) >> (4 * (g >> 1))) & 0x0F0F0F0Fu) |
             (((kiln_u32_at(high + 4 * i) >> (2 * g)) & 0x03030303u) << 4);
  }
  return b;
}
// The sub-block's products with one row's quantized activations (8 words of int8, scale da,
// integer sums of values 0-15 and 16-31): exact integer sums, then two float steps.
__device__ __forceinline__ float block_dot_row(const BlockDot& b, const unsigned q[8], float da,
                                               int sum_low, int sum_high) {
  int low = 0, high = 0;
  for (int i = 0; i < 4; ++i) {
    low = dp4a_u8_s8(b.u[i], q[i], low);
    high = dp4a_u8_s8(b.u[4 + i], q[4 + i], high);
  }
  const int products =
      b.s_low * (low - b.offset * sum_low) + b.s_high * (high - b.offset * sum_high);
  return da * (b.dw * (float)products + b.mw * (float)(sum_low + sum_high));
}
)CUDA";

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_BLOCK_DECODERS_H_
