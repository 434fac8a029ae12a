// Which matmul kernels cuBLASLt can run, and as what call: a pure function of the Kernel IR
// program and its launch shapes, so the plan dump and the launch decide the same way.
//
// A matmul kernel is a candidate when
//  - both operands are plain loads (no prologue, no cast) of f16, bf16 or f32 buffers of one
//    dtype, each a matrix stored row-major or transposed (one stride 1, the other the
//    leading dimension), batched with one uniform stride (0 for an operand every batch
//    shares), and neither is a vector;
//  - its epilogue is, in order: an optional bias add of a vector along the last dim, an
//    optional relu, and casts between f16/bf16/f32: widening ones (f16/bf16 -> f32)
//    anywhere, a narrowing one only last, from f32 into the output dtype (cuBLASLt keeps f32
//    through the epilogue and rounds once, into D: an earlier narrowing cast would be a
//    rounding it skips); it has no scalar parameter and stores one output;
//  - the output dtype is one cuBLASLt computes for these operands in CUBLAS_COMPUTE_32F (f16
//    -> f16 or f32; bf16 -> bf16 or f32; f32 -> f32), and the bias has the output's dtype,
//    loaded as stored or through widening casts only.
// gelu is not taken: Kiln's is exact (x * Phi(x), through erf), while CUBLASLT_EPILOGUE_GELU
// is the tanh approximation, up to 4.7e-4 absolute (and 22% relative, near x = -3.4) away.
// What still differs from the generated kernel (and the CPU): they round a 16-bit product to
// its dtype before the bias is added or it is widened, cuBLASLt does not. So a 16-bit
// output may differ in its last bit (round(round(p) + b) against round(p + b)), and an f32
// output of a 16-bit product is closer to the exact value, by up to that product's rounding.
#ifndef KILN_RUNTIME_CUDA_CUBLASLT_GEMM_H_
#define KILN_RUNTIME_CUDA_CUBLASLT_GEMM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "jit/fusion/kernel_ir.h"
#include "kiln/dtype.h"
#include "runtime/cuda/cublaslt.h"

namespace kiln::runtime::cuda {

// One of cuBLASLt's operands (column-major, as cuBLASLt sees memory) in a kernel's buffer.
struct CublasLtOperand {
  int input = -1;  // the kernel's input slot
  DType dtype = DType::F32;
  bool transposed = false;      // CUBLAS_OP_T
  uint64_t rows = 0, cols = 0;  // of the matrix as stored, before the op
  int64_t ld = 0;
  int64_t offset = 0;        // elements from the buffer's start
  int64_t batch_stride = 0;  // elements; 0 when every batch reads the same matrix
};

// A matmul kernel as one cublasLtMatmul. cuBLASLt is column-major and Kiln row-major, so it
// computes Dᵀ = Bᵀ Aᵀ: its A is Kiln's b, its B is Kiln's a, and its m x n output is Kiln's
// n x m result, whose rows are Kiln's last dim (where the bias runs).
struct CublasLtGemm {
  CublasLtOperand a, b;
  uint64_t m = 0, n = 0, k = 0;  // cuBLASLt's: m = Kiln's N, n = Kiln's M (times batches
                                 // folded into it), k = K
  int32_t batches = 1;
  int output = 0;  // the kernel's output slot (contiguous: ld m, batch stride m * n)
  DType output_dtype = DType::F32;
  uint32_t epilogue = kEpilogueDefault;  // a cublasLtEpilogue_t
  int bias_input = -1;                   // the kernel's input slot of the bias, or -1
  int64_t bias_offset = 0;

  // "RELU_BIAS, f16 -> f16, 2 x 128x64x256" (batches x M x N x K in Kiln's terms).
  std::string summary() const;
};

// The cuBLASLt call that computes matmul kernel `program` under `launch`, or why there is
// none (the status message names it: "epilogue not supported: sin").
absl::StatusOr<CublasLtGemm> cublaslt_gemm(const jit::KernelProgram& program,
                                           const jit::KernelLaunch& launch);

// How many times cublaslt_gemm has run in this process: tests check that a plan's later runs
// do not decide again.
uint64_t cublaslt_gemm_calls();

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUBLASLT_GEMM_H_
