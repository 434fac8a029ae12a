// One collective op over host buffers, as the CPU device and the reference evaluator run
// it (the CUDA device stages through host memory when NCCL is not there): checks that every
// rank of the group called the same collective on the same dtype and shape, then moves the
// bytes through the group's Communicator.
#ifndef KILN_COMM_HOST_COLLECTIVE_H_
#define KILN_COMM_HOST_COLLECTIVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::comm {

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv };
const char* collective_name(CollectiveKind kind);  // "all_reduce", as in trace files

// all_reduce's and reduce_scatter's combining rule (mean: the sum divided by the group size).
enum class Reduction { kSum, kMean, kMax, kMin };
const char* reduction_name(Reduction r);  // "sum" "mean" "max" "min"
// Inverse of reduction_name; false for an unknown spelling.
bool reduction_from_name(const std::string& name, Reduction* r);

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Reduction reduction = Reduction::kSum;
  int group = 0;  // group_registry id
  int peer = 0;   // broadcast: the root; send: the destination; recv: the source
  int axis = 0;   // all_gather reduce_scatter: the axis the ranks' blocks are stacked along
  DType dtype = DType::F32;
  std::vector<int64_t> in_shape, out_shape;
  const void* in = nullptr;  // dense row-major; recv's is not read
  void* out = nullptr;       // dense row-major
};

// Runs `call` on this process's part; throws kiln::Error naming the collective, the group
// and what went wrong (ranks that disagree on dtype or shape are named with both shapes).
void run_host_collective(const CollectiveCall& call);

// The checks that come before any data moves, for a device that moves the data itself
// (NCCL): agree_on_call exchanges every rank's description of a group collective and throws
// on all of them where any differs; a send announces itself to its peer, and the peer's
// recv checks the announcement (naming both types where they differ).
void agree_on_call(const CollectiveCall& call);
void announce_send(const CollectiveCall& call);
void check_announced_send(const CollectiveCall& call);

// The bytes this rank sends for `call` (for logs and bandwidth figures).
int64_t collective_payload_bytes(const CollectiveCall& call);

}  // namespace kiln::comm

#endif  // KILN_COMM_HOST_COLLECTIVE_H_
