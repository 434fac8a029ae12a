// The communicator of a process that runs alone: size 1, rank 0. Every collective is a copy
// of in to out, so code written for several processes runs unchanged in one; send and recv
// throw, since there is no peer to talk to.
#ifndef KILN_COMM_SINGLE_PROCESS_COMMUNICATOR_H_
#define KILN_COMM_SINGLE_PROCESS_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace kiln::comm {

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend_name() const override { return "single process"; }

  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, int64_t bytes) override;
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void send(const void* data, int64_t bytes, int peer) override;
  void recv(void* data, int64_t bytes, int peer) override;
  void barrier() override {}
  std::unique_ptr<Communicator> split(int color, int key) override;
};

// The bytes of `count` elements of dtype, for the collectives' dtypes (I32, I64, F32, F64);
// throws kiln::Error naming `op` for any other dtype or a negative count. Shared by the
// communicators so that they accept and reject the same calls.
int64_t collective_bytes(const char* op, int64_t count, DType dtype);

}  // namespace kiln::comm

#endif  // KILN_COMM_SINGLE_PROCESS_COMMUNICATOR_H_
