// astype into and out of the block-quantized dtypes (docs/quantization.md), run at once on
// the host: quantizing needs whole blocks, which no elementwise kernel sees. Private to the
// API layer (Tensor::astype calls it).
#ifndef KILN_JIT_API_BLOCK_ASTYPE_H_
#define KILN_JIT_API_BLOCK_ASTYPE_H_

#include "kiln/tensor.h"

namespace kiln::jit {

// x as `to`, where x's dtype or `to` is block-quantized: a sync point for x. Quantizing needs
// the last axis to be a multiple of the block; dequantizing gives f32, then a lazy astype to
// any other dtype.
Tensor block_astype(const Tensor& x, DType to);

}  // namespace kiln::jit

#endif  // KILN_JIT_API_BLOCK_ASTYPE_H_
