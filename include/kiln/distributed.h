// Several processes, one program: collectives over MPI (CPU tensors), and Megatron-style
// tensor-parallel building blocks. docs/distributed.md says how to run it.
//
// Start the same program on every process (`mpirun -np 2 ./my_program`); each one calls
// init() and gets the world: its rank and the group size. Collectives are ops like any
// other: recorded lazily, planned as fusion boundaries (the plan dump says so), written to
// and replayed from trace files, and run when a sync point needs their result. Every rank
// of a group must run the same collectives in the same order. On a single process (no
// launcher) the world has one rank, needs no library, and every collective returns its
// operand unchanged (send and recv have no peer: they throw).
//
//   kiln::distributed::Group world = kiln::distributed::init();
//   kiln::Tensor partial = kiln::matmul(x_shard, w_shard);            // this rank's share
//   kiln::Tensor y = kiln::distributed::all_reduce(partial);          // the sum over ranks
//
// A rank that dies or never joins makes the others fail within KILN_DIST_TIMEOUT seconds
// (default 120) with a kiln::Error saying so; ranks that disagree on a collective's dtype
// or shape all fail with an error naming every rank's.
#ifndef KILN_DISTRIBUTED_H_
#define KILN_DISTRIBUTED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/tensor.h"

namespace kiln::distributed {

// A set of processes that run collectives together. A cheap value (an id); groups live as
// long as the process.
class Group {
 public:
  int rank() const;  // this process's rank in the group, 0 .. size() - 1
  int size() const;
  // What moves the bytes: "mpi", or "single process".
  std::string backend() const;
  // The world rank of each of the group's ranks.
  std::vector<int> world_ranks() const;
  // The sub-group of the ranks that pass the same `color`, ordered by `key` (by rank when
  // key < 0). Collective: every rank of this group must call it (MPI_Comm_split).
  Group split(int color, int key = -1) const;
  // Returns when every rank of the group has called it (eager, not a recorded op).
  void barrier() const;

  int id() const { return id_; }

 private:
  explicit Group(int id) : id_(id) {}
  int id_;
  friend Group init();
};

// The world group. Idempotent. Under an MPI launcher it loads Open MPI (libmpi.so.40, or
// KILN_MPI_LIBRARY) and throws kiln::Error naming what is missing when it cannot.
Group init();

enum class Reduction { kSum, kMean, kMax, kMin };

// The elementwise combination of every rank's x (same dtype and shape on every rank; mean
// needs a floating dtype; 16-bit floats are combined in f32).
Tensor all_reduce(const Tensor& x, Reduction reduction = Reduction::kSum,
                  const Group& group = init());
// Every rank's x, stacked along `axis` in rank order: that axis grows size() times.
Tensor all_gather(const Tensor& x, int axis = 0, const Group& group = init());
// x's `axis` split into size() equal blocks; this rank gets block rank() combined over the
// ranks (all_reduce, then keep one block, in one collective).
Tensor reduce_scatter(const Tensor& x, Reduction reduction = Reduction::kSum, int axis = 0,
                      const Group& group = init());
// root's x, on every rank (the others' x gives only the dtype and shape).
Tensor broadcast(const Tensor& x, int root = 0, const Group& group = init());
// Sends x to rank `dst` when the result (x itself) is computed: evaluate it (or something
// that depends on it), as the matching recv on `dst` waits for it.
Tensor send(const Tensor& x, int dst, const Group& group = init());
// The tensor rank `src` sends, of this dtype and shape (checked against the sender's).
Tensor recv(DType dtype, const std::vector<int64_t>& shape, int src, const Group& group = init());
Tensor recv_like(const Tensor& like, int src, const Group& group = init());

// ---- Tensor parallelism (Megatron-LM): each rank holds a slice of each weight. ----

// The part of `extent` (heads, features) that this rank owns in an even split: rows
// [start, start + size). Throws kiln::Error when extent does not divide by the group size.
struct Shard {
  int64_t start = 0;
  int64_t size = 0;
};
Shard shard_of(int64_t extent, const Group& group = init());

// Rank r's slice `part` of `parts` of a weight along `axis`, read straight from a
// .safetensors file (only the header and that slice's bytes): PyTorch-layout [out, in]
// weights are split along axis 0 for column-parallel, axis 1 for row-parallel layers.
Tensor load_shard(const std::string& path, const std::string& name, int axis,
                  const Group& group = init());

// y = x wᵀ + b for this rank's output features: weight_shard is [out / size, in] (and
// bias_shard [out / size]). The result is this rank's slice of y's last axis, or all of y
// when gather_output (an all_gather along the last axis).
Tensor column_parallel_linear(const Tensor& x, const Tensor& weight_shard,
                              const Tensor& bias_shard = Tensor(), bool gather_output = false,
                              const Group& group = init());
// y = x wᵀ + b where x's last axis and weight_shard's [out, in / size] columns are this
// rank's slice of the input features: the partial products are summed over the ranks by
// one all_reduce; the bias (whole, [out]) is added once, after it.
Tensor row_parallel_linear(const Tensor& x_shard, const Tensor& weight_shard,
                           const Tensor& bias = Tensor(), const Group& group = init());

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_H_
