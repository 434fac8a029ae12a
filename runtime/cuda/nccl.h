// Collectives on CUDA device memory with NCCL: the device-side partner of the host
// Communicator (comm/communicator.h), which it borrows once to set itself up.
//
// Each collective only enqueues its work on the caller's stream and returns; wait() then
// blocks until that stream is done, and turns a peer that never takes part into a
// kiln::Error after collective_timeout() (KILN_DIST_TIMEOUT) instead of a hang. As for the
// host Communicator, a failure leaves the group unusable: every later call throws at once.
//
// Building Kiln needs no NCCL header: the library is opened with dlopen (runtime/cuda/
// nccl_api.h) when the first NcclCommunicator is made.
#ifndef KILN_RUNTIME_CUDA_NCCL_H_
#define KILN_RUNTIME_CUDA_NCCL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "comm/communicator.h"
#include "kiln/dtype.h"

namespace kiln::runtime::cuda {

struct NcclApi;  // runtime/cuda/nccl_api.h
enum class NcclResult : int;
enum class NcclDataType : int;
struct NcclCommContext;  // NCCL's communicator (ncclComm_t points to one)

// One NCCL communicator over the ranks of a host Communicator, one GPU per rank. Device
// pointers are CUdeviceptr values; streams are CUstream values (nullptr: the legacy default
// stream). Counts are in elements of `dtype`: F16, BF16, F32, F64, I32 or I64 (NCCL reduces
// 16-bit floats natively, unlike the host Communicator). Not thread-safe: one thread drives
// it, as NCCL requires.
class NcclCommunicator {
 public:
  // Collective over `host`: every rank calls it, with its own GPU's context current on the
  // calling thread (NCCL binds the communicator to the current device). Rank 0 makes NCCL's
  // unique id and `host` broadcasts it. Throws kiln::Error where NCCL is missing on any rank
  // (naming libnccl.so.2, the nvidia-nccl-cu13 wheel and KILN_NCCL_LIBRARY), NCCL's
  // initialization fails (on a machine without a GPU, for one), or it is not done after
  // collective_timeout(): the communicator is made nonblocking where the library can
  // (ncclCommInitRankConfig), so that a peer that never comes is an error, not a hang.
  explicit NcclCommunicator(comm::Communicator& host);
  // The same with another NCCL (tests: a stand-in); `api` must outlive this.
  NcclCommunicator(comm::Communicator& host, const NcclApi& api);
  // Destroys NCCL's communicator; aborts it instead while a collective is enqueued and not
  // waited for (ncclCommDestroy would wait for it, forever where a peer died), while a group
  // is open, or when NCCL reports an error or unfinished work (ncclCommDestroy would return
  // without freeing it).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // out[i] = op over the ranks of their in[i], for i < count; `in == out` is allowed.
  void all_reduce(uint64_t in, uint64_t out, int64_t count, DType dtype, comm::ReduceOp op,
                  void* stream);
  // out (size() * count elements) = every rank's `count` elements of in, in rank order.
  void all_gather(uint64_t in, uint64_t out, int64_t count, DType dtype, void* stream);
  // in holds size() blocks of `count` elements; out (count elements) gets op over the ranks
  // of block rank().
  void reduce_scatter(uint64_t in, uint64_t out, int64_t count, DType dtype, comm::ReduceOp op,
                      void* stream);
  // data (count elements) on every rank becomes root's.
  void broadcast(uint64_t data, int64_t count, DType dtype, int root, void* stream);
  // Point to point. A send and a recv that must progress together (a ring exchange) go
  // between group_start() and group_end(), or the two ranks wait for each other.
  void send(uint64_t data, int64_t count, DType dtype, int peer, void* stream);
  void recv(uint64_t data, int64_t count, DType dtype, int peer, void* stream);
  void group_start();
  void group_end();

  // Blocks until `stream_done` (the caller's cuStreamQuery(stream) == CUDA_SUCCESS) says the
  // work enqueued on `stream` finished. Throws kiln::Error, after aborting NCCL's
  // communicator, when NCCL reports an error or collective_timeout() passes first: the
  // message names the last collective enqueued on `stream`, this rank and KILN_DIST_TIMEOUT.
  void wait(void* stream, const std::function<bool()>& stream_done);

 private:
  void initialize(comm::Communicator& host);
  // "[op] rank r of n (nccl)", the start of every message.
  std::string context(const std::string& op) const;
  // Throws at once where an earlier failure left the group unusable.
  void check_usable(const char* op) const;
  // check_usable, then the count's and dtype's checks; NCCL's type for `dtype`.
  NcclDataType prepare(const char* op, int64_t count, DType dtype) const;
  // Throws unless `r` (a root or peer) is a rank of the group.
  void check_rank(const char* op, const char* what, int r) const;
  // Throws (after abort()) unless `result` is success, or in progress and then done within
  // collective_timeout().
  void check(NcclResult result, const char* op, const char* call);
  // Polls ncclCommGetAsyncError until the communicator leaves ncclInProgress; throws (after
  // abort()) on its error or once collective_timeout() passes, naming `call`.
  void wait_until_ready(const std::string& op, const char* call);
  [[noreturn]] void fail(const std::string& op, const std::string& why);
  void abort();
  // Which op was last enqueued on `stream`, for wait()'s messages.
  void enqueued(const char* op, void* stream) { pending_[stream] = op; }

  const NcclApi& api_;
  NcclCommContext* comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  bool in_group_ = false;  // between group_start() and group_end()
  std::string failure_;    // what made the group unusable; empty while it is usable
  std::map<void*, std::string> pending_;
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_NCCL_H_
