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
)CUDA";

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_BLOCK_DECODERS_H_
