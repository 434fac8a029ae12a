// ggml's block-quantized formats, in its exact bit layouts: rows of values stored as blocks
// of 32 (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0) or super-blocks of 256 (Q4_K Q5_K Q6_K), each block a
// few f16 scales and the packed integers. Dequantizing gives, bit for bit, the floats
// ggml's dequantize_row_* gives; quantizing the bytes its reference quantize_row_*_ref
// writes (for the K formats, its search for each sub-block's scale and min). docs/quantization.md
// describes each layout.
#ifndef KILN_OPS_QUANTIZED_BLOCKS_H_
#define KILN_OPS_QUANTIZED_BLOCKS_H_

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::ops {

// The 6-bit scale and min of sub-block j (0 to 7) of Q4_K and Q5_K, packed in the 12 bytes at
// `scales`: bytes 0-3 and 4-7 hold sub-blocks 0-3's scales and mins in their low 6 bits;
// sub-blocks 4-7 take their low 4 bits from bytes 8-11 and their high 2 bits from the top of
// 0-7 (ggml's get_scale_min_k4).
void k_scale_and_min(const uint8_t* scales, int j, int& scale, int& min);

// The n values (a multiple of block_values(format)) of the blocks at `blocks`.
void dequantize_row(DType format, const uint8_t* blocks, float* out, int64_t n);

// The most values one block holds (the super-block formats' 256).
inline constexpr int kMaxBlockValues = 256;

// Values [start, start + n) of a tensor stored as blocks from `blocks`, for any start and n:
// the blocks they touch are decoded whole, and the values wanted copied out.
void dequantize_range(DType format, const uint8_t* blocks, int64_t start, int64_t n, float* out);

// n values (a multiple of block_values(format)) into blocks at `blocks`. A block holding NaN gets a
// NaN scale, so it dequantizes to NaN (ggml leaves its integers undefined).
void quantize_row(DType format, const float* in, uint8_t* blocks, int64_t n);

}  // namespace kiln::ops

#endif  // KILN_OPS_QUANTIZED_BLOCKS_H_
