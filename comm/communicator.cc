// The launcher-independent parts of the distributed runtime: the timeout, launch detection
// and the single-process communicator.
#include "comm/communicator.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/single_process_communicator.h"
#include "kiln/error.h"

namespace kiln::comm {
namespace {

constexpr double kDefaultTimeoutSeconds = 120;

// The size a launcher gave this process's job, or 0 where its variable is unset or not a
// number.
int launcher_size(const char* name) {
  const char* value = std::getenv(name);
  int size = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &size)) return 0;
  return size;
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

std::chrono::duration<double> collective_timeout() {
  const char* value = std::getenv("KILN_DIST_TIMEOUT");
  if (value == nullptr || *value == '\0') {
    return std::chrono::duration<double>(kDefaultTimeoutSeconds);
  }
  double seconds = 0;
  if (!absl::SimpleAtod(value, &seconds) || !std::isfinite(seconds) || seconds <= 0) {
    throw Error(absl::StrCat("[distributed] KILN_DIST_TIMEOUT=\"", value,
                             "\" is not a positive number of seconds (how long a collective "
                             "waits for its peers; default ",
                             kDefaultTimeoutSeconds, ")"));
  }
  return std::chrono::duration<double>(seconds);
}

bool launched_as_several_processes() {
  // Open MPI's mpirun; PMI-1/2 launchers (MPICH's hydra, srun --mpi=pmi2); a PMIx launcher
  // (srun --mpi=pmix, prun), which sets no size of its own: Slurm's step size stands in.
  if (launcher_size("OMPI_COMM_WORLD_SIZE") > 1) return true;
  if (launcher_size("PMI_SIZE") > 1) return true;
  return std::getenv("PMIX_RANK") != nullptr && launcher_size("SLURM_STEP_NUM_TASKS") > 1;
}

int64_t collective_bytes(const char* op, int64_t count, DType dtype) {
  if (count < 0) throw Error(absl::StrCat("[", op, "] count ", count, " is negative"));
  switch (dtype) {
    case DType::I32:
    case DType::F32:
      return count * 4;
    case DType::I64:
    case DType::F64:
      return count * 8;
    default:
      break;
  }
  throw Error(absl::StrCat("[", op, "] dtype ", dtype_name(dtype),
                           " cannot be reduced across processes: use i32, i64, f32 or f64 "
                           "(narrower floats and integers are widened to f32 and i32 first)"));
}

void SingleProcessCommunicator::all_reduce(const void* in, void* out, int64_t count, DType dtype,
                                           ReduceOp) {
  int64_t bytes = collective_bytes("all_reduce", count, dtype);
  if (in != out && bytes > 0) std::memmove(out, in, bytes);
}

void SingleProcessCommunicator::all_gather(const void* in, void* out, int64_t bytes) {
  if (bytes < 0) throw Error(absl::StrCat("[all_gather] byte count ", bytes, " is negative"));
  if (in != out && bytes > 0) std::memmove(out, in, bytes);
}

void SingleProcessCommunicator::reduce_scatter(const void* in, void* out, int64_t count,
                                               DType dtype, ReduceOp) {
  int64_t bytes = collective_bytes("reduce_scatter", count, dtype);
  if (in != out && bytes > 0) std::memmove(out, in, bytes);
}

void SingleProcessCommunicator::broadcast(void*, int64_t bytes, int root) {
  if (bytes < 0) throw Error(absl::StrCat("[broadcast] byte count ", bytes, " is negative"));
  if (root != 0) {
    throw Error(absl::StrCat("[broadcast] root ", root,
                             " is not a rank of this single-process group (size 1)"));
  }
}

void SingleProcessCommunicator::send(const void*, int64_t, int peer) {
  throw Error(
      absl::StrCat("[send] this process runs alone (single process communicator, size "
                   "1): there is no peer ",
                   peer, " to send to; start several processes with mpirun"));
}

void SingleProcessCommunicator::recv(void*, int64_t, int peer) {
  throw Error(
      absl::StrCat("[recv] this process runs alone (single process communicator, size "
                   "1): there is no peer ",
                   peer, " to receive from; start several processes with mpirun"));
}

std::unique_ptr<Communicator> SingleProcessCommunicator::split(int color, int) {
  if (color < 0) throw Error(absl::StrCat("[split] color ", color, " is negative"));
  return std::make_unique<SingleProcessCommunicator>();
}

}  // namespace kiln::comm
