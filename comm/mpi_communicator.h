// The Communicator over MPI (Open MPI, opened at run time: comm/mpi_library.h)
// for host memory, in processes started by mpirun.
//
// Every call posts MPI's nonblocking form (MPI_Iallreduce, MPI_Isend, ...) and polls it with
// MPI_Test until it completes or collective_timeout() passes, so a dead or missing rank
// makes the others throw instead of hang. MPI cannot cancel a collective: after a timeout the
// request stays posted, and a peer that turns up late may still write into the output
// buffer, so a process should end (not retry) once a communicator has failed. Every MPI call
// of the process is made under one mutex (MPI is initialized with MPI_THREAD_SERIALIZED).
#ifndef KILN_COMM_MPI_COMMUNICATOR_H_
#define KILN_COMM_MPI_COMMUNICATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/functional/function_ref.h"
#include "comm/communicator.h"
#include "comm/mpi_library.h"

namespace kiln::comm {

// All the processes of the job (MPI_COMM_WORLD), with Kiln's own copy of it so that Kiln's
// messages never match an application's. Loads Open MPI and initializes it on first use
// (giving up after collective_timeout() if the other ranks never start); MPI is finalized at
// exit unless some MPI call of the process failed (a peer may be gone, and MPI_Finalize
// would wait for it). Collective over the job: every rank must call it.
std::unique_ptr<Communicator> open_mpi_world();
// As above, but no single MPI call moves more than `max_count` elements. MPI counts are int,
// so larger transfers are split into pieces anyway; tests pass a small value to cover that.
std::unique_ptr<Communicator> open_mpi_world(int max_count);

class MpiCommunicator final : public Communicator {
 public:
  // Wraps `comm`; frees it on destruction where `owned`. `group` names it in errors.
  MpiCommunicator(const mpi::Library& mpi, mpi::Comm comm, bool owned, int max_count,
                  std::string group);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "mpi"; }

  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, int64_t bytes) override;
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void send(const void* data, int64_t bytes, int peer) override;
  void recv(void* data, int64_t bytes, int peer) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  // A copy of this group (MPI_Comm_idup) that reports errors instead of aborting the job.
  std::unique_ptr<MpiCommunicator> duplicate(const char* op);

 private:
  using Clock = std::chrono::steady_clock;
  // One call in progress: what errors name, and how long each of its requests may wait.
  struct Call {
    const char* op;
    int peer;  // for send and recv; -1 for a collective
    double timeout_seconds;
  };

  Call begin(const char* op, int peer = -1);
  std::string who(const Call& call) const;  // "[all_reduce] rank 1 of 2 (mpi)"
  // Posts one nonblocking MPI call (`post` returns MPI's error code) and waits for it.
  void post_and_wait(const Call& call, const char* function,
                     absl::FunctionRef<int(mpi::Request*)> post, mpi::Status* status = nullptr);
  void wait(const Call& call, const char* function, mpi::Request* request, mpi::Status* status);
  [[noreturn]] void fail_mpi_error(const Call& call, const char* function, int code);
  [[noreturn]] void fail_timeout(const Call& call, mpi::Request* request);
  // Marks the group unusable, and the process as one that must not finalize MPI, then throws.
  [[noreturn]] void fail(const std::string& message);
  void check_rank(const char* op, const char* what, int rank) const;
  // Calls chunk(offset, n) over [0, count) in pieces of at most max_count_ elements; once
  // with n = 0 where count is 0, so that every rank still takes part.
  void for_each_chunk(int64_t count, absl::FunctionRef<void(int64_t, int)> chunk) const;
  mpi::Datatype datatype(DType dtype) const;
  mpi::Op reduce_op(ReduceOp op) const;

  const mpi::Library& mpi_;
  mpi::Comm comm_;
  const bool owned_;
  const int max_count_;
  const std::string group_;
  int rank_ = 0;
  int size_ = 0;
  // Held for each whole call: the calls on one group run one at a time, in order.
  std::mutex call_mutex_;
  std::string failure_;  // the first failure's message; empty while the group is usable
};

}  // namespace kiln::comm

#endif  // KILN_COMM_MPI_COMMUNICATOR_H_
