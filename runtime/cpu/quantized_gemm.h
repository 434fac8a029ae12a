// The CPU's matrix product with a block-quantized weight (docs/quantization.md): C = A · Wᵀ
// with W's rows stored as ggml blocks and read where they lie (no float copy of W ever
// exists). A's rows are rounded to 8-bit blocks of 32 first, as llama.cpp does, and each
// product of a weight chunk with an activation block is an integer dot product
// (quantized_dot.h); docs/contracts.md states the accuracy that gives.
#ifndef KILN_RUNTIME_CPU_QUANTIZED_GEMM_H_
#define KILN_RUNTIME_CPU_QUANTIZED_GEMM_H_

#include <cstdint>

#include "kiln/dtype.h"
#include "runtime/cpu/gemm.h"

namespace kiln::runtime::cpu {

// n weight rows (B's columns) of k values each: row j's blocks of `format` start at byte
// data + j * row_bytes, at a block boundary.
struct QuantizedMatrix {
  DType format = DType::Q8_0;
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;
  int64_t n = 0, k = 0;
  // The contents' version (Buffer::version) of the buffer the weight lies in, or 0: with
  // one, a product of few rows keeps the weight's decoded panels (packed_weight_cache.h).
  uint64_t version = 0;
};

// C (m × n, row stride ldc) = A (m × k, f32, bf16 or f16) · Wᵀ, then `epilogue` (gemm.h),
// on all cores (inline inside a parallel_for job). k must be a multiple of 32.
void quantized_gemm(int64_t m, const GemmOperand& a, const QuantizedMatrix& w, float* c,
                    int64_t ldc, const GemmEpilogue& epilogue = {});

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_QUANTIZED_GEMM_H_
