// cuBLASLt (libcublasLt.so from the CUDA Toolkit), opened with dlopen on first use like NVRTC:
// Kiln builds and runs where it is missing, and its matmuls then use the generated kernel.
//
// The few types, constants and entry points Kiln uses are declared here with cublasLt.h's C
// signatures, so building Kiln needs no CUDA headers. tests/cuda/cublaslt_test.cc pins every one
// of them to the real header when CMake finds it (KILN_CUBLASLT_HEADER).
#ifndef KILN_RUNTIME_CUDA_CUBLASLT_H_
#define KILN_RUNTIME_CUDA_CUBLASLT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/cuda/driver.h"

namespace kiln::runtime::cuda {

using CublasStatus = int;                        // cublasStatus_t
using CublasLtHandle = struct CublasLtContext*;  // cublasLtHandle_t
struct CublasLtMatrixLayoutOpaque {              // cublasLtMatrixLayoutOpaque_t
  uint64_t data[8];
};
using CublasLtMatrixLayout = CublasLtMatrixLayoutOpaque*;
struct CublasLtMatmulDescOpaque {  // cublasLtMatmulDescOpaque_t
  uint64_t data[32];
};
using CublasLtMatmulDesc = CublasLtMatmulDescOpaque*;
struct CublasLtMatmulPreferenceOpaque {  // cublasLtMatmulPreferenceOpaque_t
  uint64_t data[8];
};
using CublasLtMatmulPreference = CublasLtMatmulPreferenceOpaque*;
struct CublasLtMatmulAlgo {  // cublasLtMatmulAlgo_t
  uint64_t data[8];
};
struct CublasLtHeuristicResult {  // cublasLtMatmulHeuristicResult_t
  CublasLtMatmulAlgo algo;
  size_t workspace_size = 0;
  CublasStatus state = 0;
  float waves_count = 0;
  int reserved[4] = {};
};

inline constexpr CublasStatus kCublasStatusSuccess = 0;         // CUBLAS_STATUS_SUCCESS
inline constexpr CublasStatus kCublasStatusNotInitialized = 1;  // CUBLAS_STATUS_NOT_INITIALIZED
inline constexpr CublasStatus kCublasStatusInvalidValue = 7;    // CUBLAS_STATUS_INVALID_VALUE
inline constexpr CublasStatus kCublasStatusNotSupported = 15;   // CUBLAS_STATUS_NOT_SUPPORTED
inline constexpr int kCublasCompute32F = 68;  // CUBLAS_COMPUTE_32F: full f32, never TF32
inline constexpr int kCudaR32F = 0;           // cudaDataType CUDA_R_32F
inline constexpr int kCudaR16F = 2;           // CUDA_R_16F
inline constexpr int kCudaR16BF = 14;         // CUDA_R_16BF
inline constexpr int kCublasOpN = 0;          // CUBLAS_OP_N
inline constexpr int kCublasOpT = 1;          // CUBLAS_OP_T
// cublasLtMatmulDescAttributes_t
inline constexpr int kMatmulDescTransA = 3;       // CUBLASLT_MATMUL_DESC_TRANSA (int32_t)
inline constexpr int kMatmulDescTransB = 4;       // CUBLASLT_MATMUL_DESC_TRANSB (int32_t)
inline constexpr int kMatmulDescEpilogue = 7;     // CUBLASLT_MATMUL_DESC_EPILOGUE (uint32_t)
inline constexpr int kMatmulDescBiasPointer = 8;  // CUBLASLT_MATMUL_DESC_BIAS_POINTER
// cublasLtEpilogue_t. The bias is a vector along D's rows (cuBLASLt is column-major: Kiln's
// last dim). CUBLASLT_EPILOGUE_GELU is the tanh approximation, not Kiln's exact gelu, so
// Kiln never asks for it (cublaslt_gemm.h).
inline constexpr uint32_t kEpilogueDefault = 1;    // CUBLASLT_EPILOGUE_DEFAULT
inline constexpr uint32_t kEpilogueRelu = 2;       // CUBLASLT_EPILOGUE_RELU
inline constexpr uint32_t kEpilogueBias = 4;       // CUBLASLT_EPILOGUE_BIAS
inline constexpr uint32_t kEpilogueReluBias = 6;   // CUBLASLT_EPILOGUE_RELU_BIAS
inline constexpr uint32_t kEpilogueGelu = 32;      // CUBLASLT_EPILOGUE_GELU (tanh form)
inline constexpr uint32_t kEpilogueGeluBias = 36;  // CUBLASLT_EPILOGUE_GELU_BIAS (tanh form)
// cublasLtMatrixLayoutAttribute_t
inline constexpr int kLayoutBatchCount = 5;          // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT
inline constexpr int kLayoutStridedBatchOffset = 6;  // ..._STRIDED_BATCH_OFFSET (int64_t)
// cublasLtMatmulPreferenceAttributes_t
inline constexpr int kPreferenceMaxWorkspaceBytes = 1;  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
// uint32_t: which split-K reductions an algorithm may use. Kiln allows only
// CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, so partial sums are added in f32 (the compute type),
// never in a 16-bit output type.
inline constexpr int kPreferenceReductionSchemeMask = 3;  // ..._REDUCTION_SCHEME_MASK
inline constexpr uint32_t kReductionSchemeComputeType =
    2;                                                   // CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
inline constexpr int kPreferenceMinAlignmentABytes = 5;  // ..._MIN_ALIGNMENT_A_BYTES (uint32_t)
inline constexpr int kPreferenceMinAlignmentBBytes = 6;  // ..._MIN_ALIGNMENT_B_BYTES
inline constexpr int kPreferenceMinAlignmentCBytes = 7;  // ..._MIN_ALIGNMENT_C_BYTES
inline constexpr int kPreferenceMinAlignmentDBytes = 8;  // ..._MIN_ALIGNMENT_D_BYTES

struct CublasLtApi {
  absl::Status status;  // why cuBLASLt cannot be used, when it cannot
  std::string library;  // the file that was opened
  size_t (*get_version)() = nullptr;
  CublasStatus (*create)(CublasLtHandle*) = nullptr;
  CublasStatus (*destroy)(CublasLtHandle) = nullptr;
  CublasStatus (*matmul_desc_create)(CublasLtMatmulDesc*, int compute_type,
                                     int scale_type) = nullptr;
  CublasStatus (*matmul_desc_set_attribute)(CublasLtMatmulDesc, int attribute, const void*,
                                            size_t) = nullptr;
  CublasStatus (*matmul_desc_destroy)(CublasLtMatmulDesc) = nullptr;
  CublasStatus (*matrix_layout_create)(CublasLtMatrixLayout*, int type, uint64_t rows,
                                       uint64_t cols, int64_t ld) = nullptr;
  CublasStatus (*matrix_layout_set_attribute)(CublasLtMatrixLayout, int attribute, const void*,
                                              size_t) = nullptr;
  CublasStatus (*matrix_layout_destroy)(CublasLtMatrixLayout) = nullptr;
  CublasStatus (*preference_create)(CublasLtMatmulPreference*) = nullptr;
  CublasStatus (*preference_set_attribute)(CublasLtMatmulPreference, int attribute, const void*,
                                           size_t) = nullptr;
  CublasStatus (*preference_destroy)(CublasLtMatmulPreference) = nullptr;
  CublasStatus (*algo_get_heuristic)(CublasLtHandle, CublasLtMatmulDesc, CublasLtMatrixLayout a,
                                     CublasLtMatrixLayout b, CublasLtMatrixLayout c,
                                     CublasLtMatrixLayout d, CublasLtMatmulPreference,
                                     int requested, CublasLtHeuristicResult* results,
                                     int* returned) = nullptr;
  CublasStatus (*matmul)(CublasLtHandle, CublasLtMatmulDesc, const void* alpha, const void* a,
                         CublasLtMatrixLayout, const void* b, CublasLtMatrixLayout,
                         const void* beta, const void* c, CublasLtMatrixLayout, void* d,
                         CublasLtMatrixLayout, const CublasLtMatmulAlgo*, void* workspace,
                         size_t workspace_bytes, CUstream) = nullptr;
  // Optional (message text only): cublasLtGetStatusName.
  const char* (*status_name)(CublasStatus) = nullptr;
};

// The files tried, in order: KILN_CUBLASLT_LIBRARY alone when it is set, else
// libcublasLt.so.13, .so.12, .so and the toolkit's /usr/local/cuda/lib64/libcublasLt.so.
std::vector<std::string> cublaslt_library_candidates();

// Opens the first of `candidates` that loads and resolves every entry point; a file that
// loads but lacks one is closed and the next tried. The status names every file tried and
// why each was passed over. The one kept is never closed: entry points stay valid.
CublasLtApi load_cublaslt_api(const std::vector<std::string>& candidates);

// The process's cuBLASLt (load_cublaslt_api(cublaslt_library_candidates()), loaded once, on
// first use: the library is large, so only a matmul that cuBLASLt could run loads it), or the
// one set_cublaslt_api_for_testing put in its place.
const CublasLtApi& cublaslt_api();

// Test hook: cublaslt_api() returns `api` from now on, or the process's again for nullptr.
void set_cublaslt_api_for_testing(const CublasLtApi* api);
// Counts the calls of set_cublaslt_api_for_testing: a device that made its handle with the
// cuBLASLt of another generation makes a new one (tests run several in one process).
uint64_t cublaslt_api_generation();

// KILN_CUBLASLT=0 turns cuBLASLt off (read at each call: each GPU calls it once, when it is
// first used).
bool cublaslt_disabled_by_environment();

// OK, or an error naming `call` and the status (its cuBLASLt name where the library has one).
absl::Status check_cublas(const CublasLtApi& api, CublasStatus status, const char* call);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUBLASLT_H_
