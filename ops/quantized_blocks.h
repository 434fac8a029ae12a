// ggml's block-quantized formats, in its exact bit layouts: rows of values stored as blocks
// of 32 (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0) or super-blocks of 256 (Q4_K Q5_K Q6_K), each block a
// few f16 scales and the packed integers. Dequantizing gives, bit for bit, the floats
// ggml's dequantize_row_* gives; quantizing (the 32-value formats) the bytes its reference
// quantize_row_*_ref writes. docs/quantization.md describes each layout.
#ifndef KILN_OPS_QUANTIZED_BLOCKS_H_
#define KILN_OPS_QUANTIZED_BLOCKS_H_

#include <cstdint>

namespace kiln::ops {

enum class BlockFormat { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ4_K, kQ5_K, kQ6_K };

inline constexpr BlockFormat kAllBlockFormats[] = {
    BlockFormat::kQ4_0, BlockFormat::kQ4_1, BlockFormat::kQ5_0, BlockFormat::kQ5_1,
    BlockFormat::kQ8_0, BlockFormat::kQ4_K, BlockFormat::kQ5_K, BlockFormat::kQ6_K};

struct BlockLayout {
  const char* name;  // ggml's: "Q4_0"
  int values;        // per block: 32 or 256
  int bytes;         // per block
};

const BlockLayout& block_layout(BlockFormat format);

// Whether quantize_row writes `format` (the 32-value formats; the super-block formats'
// quantizers are not written yet).
bool can_quantize(BlockFormat format);

// The n values (a multiple of the block's) of the blocks at `blocks`.
void dequantize_row(BlockFormat format, const uint8_t* blocks, float* out, int64_t n);

// n values (a multiple of the block's) into blocks at `blocks`; `format` must be one that
// can_quantize. A block holding NaN gets a NaN scale, so it dequantizes to NaN (ggml leaves
// its integers undefined).
void quantize_row(BlockFormat format, const float* in, uint8_t* blocks, int64_t n);

}  // namespace kiln::ops

#endif  // KILN_OPS_QUANTIZED_BLOCKS_H_
