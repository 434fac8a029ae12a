// A group of processes that run collectives together: the one interface between Kiln's
// collective ops (all_reduce, all_gather, ...) and the library that moves the bytes (MPI for
// host memory; runtime/cuda has NCCL for device memory).
//
// Every call blocks until its part on this process is done, or throws kiln::Error naming the
// collective, the group and the cause. A peer that does not take part within
// collective_timeout() (KILN_DIST_TIMEOUT, seconds) is such a failure: a rank that died or
// never joined makes the others fail, not hang. After a failure the group is unusable and
// every later call on it throws at once.
#ifndef KILN_COMM_COMMUNICATOR_H_
#define KILN_COMM_COMMUNICATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/dtype.h"

namespace kiln::comm {

enum class ReduceOp { kSum, kMax, kMin };
const char* reduce_op_name(ReduceOp op);  // "sum", "max", "min"

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What moves the bytes, for plan dumps and errors: "mpi", "single process".
  virtual std::string backend_name() const = 0;

  // out[i] = op over the ranks of their in[i], for i < count. `in == out` is allowed.
  // dtype is one of I32, I64, F32, F64 (callers widen 16-bit floats to F32 first).
  virtual void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) = 0;
  // out (size() * bytes) = every rank's `bytes` bytes of in, in rank order.
  virtual void all_gather(const void* in, void* out, int64_t bytes) = 0;
  // in holds size() blocks of `count` elements each; out (count elements) gets op over the
  // ranks of block rank(). dtype as for all_reduce.
  virtual void reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                              ReduceOp op) = 0;
  // data (bytes) on every rank becomes root's.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // Point to point, matched in order between each pair of ranks.
  virtual void send(const void* data, int64_t bytes, int peer) = 0;
  virtual void recv(void* data, int64_t bytes, int peer) = 0;
  virtual void barrier() = 0;
  // The sub-group of the ranks that pass the same color, ordered by key, then by rank
  // (MPI_Comm_split). Collective over this group: every rank must call it.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

// KILN_DIST_TIMEOUT in seconds (a positive number; default 120): how long a collective waits
// for its peers before it fails.
std::chrono::duration<double> collective_timeout();

// True when this process was started by an MPI launcher (mpirun, srun) as one of several.
bool launched_as_several_processes();

}  // namespace kiln::comm

#endif  // KILN_COMM_COMMUNICATOR_H_
