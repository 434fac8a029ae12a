// NCCL (libnccl.so.2), opened with dlopen on first use like cuBLASLt: Kiln builds and runs
// where it is missing, and only a collective on CUDA tensors needs it.
//
// The few types, values and entry points Kiln uses are declared here with nccl.h's C
// signatures, so building Kiln needs neither nccl.h nor the CUDA headers it includes.
// tests/cuda/nccl_test.cc pins every one of them to the real header when CMake finds it
// (KILN_NCCL_HEADER). Internal to runtime/cuda: users see runtime/cuda/nccl.h.
#ifndef KILN_RUNTIME_CUDA_NCCL_API_H_
#define KILN_RUNTIME_CUDA_NCCL_API_H_

#include <climits>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/cuda/driver.h"

namespace kiln::runtime::cuda {

// ncclResult_t. Releases after 2.28 add ncclTimeout (8), which Kiln does not name: 2.28 lacks
// it, and any result but success and in-progress is an error with ncclGetErrorString's text.
enum class NcclResult : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};
enum class NcclDataType : int {  // ncclDataType_t
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};
enum class NcclRedOp : int {  // ncclRedOp_t (the built-in ones)
  kSum = 0,
  kProd = 1,
  kMax = 2,
  kMin = 3,
  kAvg = 4,
};
inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct NcclUniqueId {                              // ncclUniqueId
  char internal[kNcclUniqueIdBytes];
};
using NcclComm = struct NcclCommContext*;  // ncclComm_t

// The leading fields of ncclConfig_t, as NCCL 2.17 defined it. ncclConfig_t only grows at its
// end, and NCCL reads a config by its `size` and `version` fields: the fields after these keep
// the library's defaults. Kiln sets one, `blocking` = 0, so that ncclCommInitRankConfig
// returns at once and Kiln can give up on an initialization whose peer never comes
// (ncclCommInitRank itself has no timeout).
inline constexpr unsigned int kNcclApiMagic = 0xcafebeef;  // NCCL_API_MAGIC
inline constexpr int kNcclConfigUndefInt = INT_MIN;        // NCCL_CONFIG_UNDEF_INT
inline constexpr unsigned int kNcclConfigVersion = 21700;  // NCCL_VERSION(2, 17, 0)
struct NcclConfig {                                        // ncclConfig_t's first fields
  size_t size = sizeof(NcclConfig);
  unsigned int magic = kNcclApiMagic;
  unsigned int version = kNcclConfigVersion;
  int blocking = kNcclConfigUndefInt;
  int cga_cluster_size = kNcclConfigUndefInt;
  int min_ctas = kNcclConfigUndefInt;
  int max_ctas = kNcclConfigUndefInt;
  const char* net_name = nullptr;
};

// The entry points, as nccl.h declares them (CUstream stands for cudaStream_t: the same type).
using NcclGetVersionFn = NcclResult (*)(int* version);
using NcclGetUniqueIdFn = NcclResult (*)(NcclUniqueId* id);
using NcclCommInitRankFn = NcclResult (*)(NcclComm* comm, int nranks, NcclUniqueId id, int rank);
using NcclCommInitRankConfigFn = NcclResult (*)(NcclComm* comm, int nranks, NcclUniqueId id,
                                                int rank, NcclConfig* config);
using NcclCommDestroyFn = NcclResult (*)(NcclComm comm);
using NcclCommAbortFn = NcclResult (*)(NcclComm comm);
using NcclCommGetAsyncErrorFn = NcclResult (*)(NcclComm comm, NcclResult* async_error);
using NcclGetErrorStringFn = const char* (*)(NcclResult result);
using NcclGetLastErrorFn = const char* (*)(NcclComm comm);
using NcclAllReduceFn = NcclResult (*)(const void* send, void* recv, size_t count,
                                       NcclDataType type, NcclRedOp op, NcclComm comm,
                                       CUstream stream);
using NcclAllGatherFn = NcclResult (*)(const void* send, void* recv, size_t send_count,
                                       NcclDataType type, NcclComm comm, CUstream stream);
using NcclReduceScatterFn = NcclResult (*)(const void* send, void* recv, size_t recv_count,
                                           NcclDataType type, NcclRedOp op, NcclComm comm,
                                           CUstream stream);
using NcclBroadcastFn = NcclResult (*)(const void* send, void* recv, size_t count,
                                       NcclDataType type, int root, NcclComm comm, CUstream stream);
using NcclSendFn = NcclResult (*)(const void* send, size_t count, NcclDataType type, int peer,
                                  NcclComm comm, CUstream stream);
using NcclRecvFn = NcclResult (*)(void* recv, size_t count, NcclDataType type, int peer,
                                  NcclComm comm, CUstream stream);
using NcclGroupFn = NcclResult (*)();

struct NcclApi {
  absl::Status status;  // why NCCL cannot be used, when it cannot
  std::string library;  // the file that was opened
  NcclGetVersionFn get_version = nullptr;
  NcclGetUniqueIdFn get_unique_id = nullptr;
  NcclCommInitRankFn comm_init_rank = nullptr;
  NcclCommDestroyFn comm_destroy = nullptr;
  NcclCommAbortFn comm_abort = nullptr;
  NcclCommGetAsyncErrorFn comm_get_async_error = nullptr;
  NcclGetErrorStringFn get_error_string = nullptr;
  NcclAllReduceFn all_reduce = nullptr;
  NcclAllGatherFn all_gather = nullptr;
  NcclReduceScatterFn reduce_scatter = nullptr;
  NcclBroadcastFn broadcast = nullptr;
  NcclSendFn send = nullptr;
  NcclRecvFn recv = nullptr;
  NcclGroupFn group_start = nullptr;
  NcclGroupFn group_end = nullptr;
  // Optional (message text only; NCCL 2.13 and later): ncclGetLastError, which says what
  // failed inside NCCL ("Cuda failure 'CUDA driver version is insufficient ...'").
  NcclGetLastErrorFn get_last_error = nullptr;
  // Optional (NCCL 2.14 and later): ncclCommInitRankConfig, for an initialization bounded by
  // KILN_DIST_TIMEOUT. Without it Kiln calls ncclCommInitRank, which waits for every peer.
  NcclCommInitRankConfigFn comm_init_rank_config = nullptr;
};

// The files tried, in order: KILN_NCCL_LIBRARY alone when it is set, else the system's
// libnccl.so.2 (the loader's search path), else the one scripts/install-deps.sh installs from
// the nvidia-nccl-cu13 wheel, ~/.cache/kiln/tools/nccl/nvidia/nccl/lib/libnccl.so.2.
std::vector<std::string> nccl_library_candidates();

// Opens the first of `candidates` that loads and resolves every entry point; a file that
// loads but lacks one is closed and the next tried. The status names every file tried, why
// each was passed over, and how to install NCCL. The one kept is never closed.
NcclApi load_nccl_api(const std::vector<std::string>& candidates);

// The process's NCCL (load_nccl_api(nccl_library_candidates()), loaded once, on first use:
// the library is large, so only a collective on CUDA tensors loads it).
const NcclApi& nccl_api();

// "ncclAllReduce failed: unhandled cuda error (1): <ncclGetLastError>"; the last part only
// where the library has ncclGetLastError and it says something.
std::string nccl_failure(const NcclApi& api, NcclResult result, const char* call);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_NCCL_API_H_
