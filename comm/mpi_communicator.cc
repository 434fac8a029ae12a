// The MPI communicator: nonblocking MPI calls polled against a deadline.
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"
#include "comm/single_process_communicator.h"
#include "kiln/error.h"

namespace kiln::comm {
namespace {

constexpr int kTag = 0;  // send/recv: pairs are matched in order, so one tag is enough

// Every MPI call of the process, so that MPI_THREAD_SERIALIZED suffices.
std::mutex& mpi_mutex() {
  static std::mutex* mutex = new std::mutex;  // never destroyed: used at exit
  return *mutex;
}

// Set by any MPI failure in this process. MPI_Finalize then is skipped at exit: it waits for
// every rank, and the rank we gave up on may never come (mpirun ends the job instead).
std::atomic<bool> g_failed{false};

// "(KILN_DIST_TIMEOUT=5)", or how to set it where the default applies.
std::string timeout_setting() {
  const char* value = std::getenv("KILN_DIST_TIMEOUT");
  if (value != nullptr && *value != '\0') return absl::StrCat("(KILN_DIST_TIMEOUT=", value, ")");
  return "(the default; KILN_DIST_TIMEOUT sets it)";
}

const char* byte_at(const void* base, int64_t offset) {
  return static_cast<const char*>(base) + offset;
}
char* byte_at(void* base, int64_t offset) { return static_cast<char*>(base) + offset; }

// Spins (yielding the core) for the first 100 µs: a collective between ready ranks completes
// in microseconds, and a sleep's wake-up costs tens of µs. After that it sleeps, longer the
// longer it has waited (up to 1 ms), so that a rank waiting for a slow peer leaves the cores
// to it: with more ranks than cores (mpirun --oversubscribe), spinning longer made the MPI
// tests 20 times slower.
void pause(std::chrono::steady_clock::duration waited) {
  constexpr auto kSpin = std::chrono::microseconds(100);
  if (waited < kSpin) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(1), waited / 16));
  }
}

void finalize_at_exit() {
  if (g_failed) return;
  const mpi::Library& mpi = mpi::library();  // loaded before this was registered
  std::lock_guard<std::mutex> lock(mpi_mutex());
  int finalized = 0;
  if (mpi.Finalized(&finalized) == mpi::kSuccess && !finalized) mpi.Finalize();
}

// The result of MPI_Init_thread, shared with the thread that calls it: that thread may
// outlive the wait for it.
struct InitAttempt {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  int code = mpi::kSuccess;
  int provided = mpi::kThreadSingle;
};

std::string init_prefix() {
  return absl::StrCat("[open_mpi_world] this process (", mpi::launch_description(), ")");
}

void check_thread_level(int provided) {
  if (provided >= mpi::kThreadSerialized) return;
  throw Error(absl::StrCat(init_prefix(), ": MPI provides thread level ", provided,
                           ", but Kiln needs MPI_THREAD_SERIALIZED (", mpi::kThreadSerialized,
                           ") or more: its calls come from several threads"));
}

// MPI_Init_thread waits for every rank of the job to start, so it runs on a thread of its
// own that is abandoned (left detached) where it does not return in time.
void run_init_thread(const mpi::Library& mpi) {
  std::chrono::duration<double> timeout = collective_timeout();
  auto attempt = std::make_shared<InitAttempt>();
  std::thread([&mpi, attempt] {
    int provided = mpi::kThreadSingle;
    int code = mpi.Init_thread(nullptr, nullptr, mpi::kThreadSerialized, &provided);
    std::lock_guard<std::mutex> lock(attempt->mutex);
    attempt->done = true;
    attempt->code = code;
    attempt->provided = provided;
    attempt->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(attempt->mutex);
  if (!attempt->done_cv.wait_for(lock, timeout, [&] { return attempt->done; })) {
    throw Error(absl::StrCat(init_prefix(), " waited ", timeout.count(), " s in MPI_Init_thread ",
                             timeout_setting(),
                             ": a rank has died, hung or never started, or mpirun cannot "
                             "reach this process"));
  }
  if (attempt->code != mpi::kSuccess) {
    throw Error(absl::StrCat(init_prefix(),
                             ": MPI_Init_thread failed: ", mpi::error_string(mpi, attempt->code)));
  }
  check_thread_level(attempt->provided);
}

void initialize_once(const mpi::Library& mpi) {
  int initialized = 0;
  int finalized = 0;
  mpi.Initialized(&initialized);
  mpi.Finalized(&finalized);
  if (finalized) throw Error(absl::StrCat(init_prefix(), ": MPI was already finalized"));
  if (initialized) {  // by the application, which then also finalizes it
    int provided = mpi::kThreadSingle;
    mpi.Query_thread(&provided);
    check_thread_level(provided);
    return;
  }
  run_init_thread(mpi);
  std::atexit(finalize_at_exit);
  // Open MPI reports some argument errors (MPI_ERR_BUFFER for aliased buffers, say) through
  // MPI_COMM_WORLD's handler whatever the communicator, and that handler aborts the job by
  // default. MPI is Kiln's alone here (an application that initializes MPI keeps its own
  // choice), so every error comes back as a code that Kiln reports.
  int code = mpi.Comm_set_errhandler(mpi.comm_world, mpi.errors_return);
  if (code != mpi::kSuccess) {
    throw Error(absl::StrCat(init_prefix(),
                             ": MPI_Comm_set_errhandler failed: ", mpi::error_string(mpi, code)));
  }
}

// Initializes MPI once per process; a failure is remembered and thrown again at once.
void initialize(const mpi::Library& mpi) {
  static std::mutex mutex;
  static bool ready = false;
  static std::string* failure = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (ready) return;
  if (failure != nullptr) throw Error(*failure);
  try {
    initialize_once(mpi);
    ready = true;
  } catch (const Error& error) {
    failure = new std::string(error.what());  // never freed: read until exit
    g_failed = true;
    throw;
  }
}

}  // namespace

std::unique_ptr<Communicator> open_mpi_world() { return open_mpi_world(mpi::kMaxCount); }

std::unique_ptr<Communicator> open_mpi_world(int max_count) {
  if (max_count < 1) {
    throw Error(absl::StrCat("[open_mpi_world] max_count ", max_count, " is not positive"));
  }
  const mpi::Library& mpi = mpi::library();
  initialize(mpi);
  // COMM_WORLD itself is borrowed only to copy it: the copy's errors are Kiln's to report.
  MpiCommunicator world(mpi, mpi.comm_world, /*owned=*/false, max_count, "mpi");
  return world.duplicate("open_mpi_world");
}

MpiCommunicator::MpiCommunicator(const mpi::Library& mpi, mpi::Comm comm, bool owned, int max_count,
                                 std::string group)
    : mpi_(mpi), comm_(comm), owned_(owned), max_count_(max_count), group_(std::move(group)) {
  std::lock_guard<std::mutex> lock(mpi_mutex());
  mpi_.Comm_rank(comm_, &rank_);
  mpi_.Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  // A failed group may still have requests in flight that refer to it: it is left alone.
  if (!owned_ || !failure_.empty()) return;
  std::lock_guard<std::mutex> lock(mpi_mutex());
  int finalized = 0;
  if (mpi_.Finalized(&finalized) == mpi::kSuccess && !finalized) mpi_.Comm_free(&comm_);
}

MpiCommunicator::Call MpiCommunicator::begin(const char* op, int peer) {
  if (!failure_.empty()) {
    throw Error(absl::StrCat("[", op, "] rank ", rank_, " of ", size_, " (", group_,
                             ") is unusable after an earlier failure: ", failure_));
  }
  return Call{op, peer, collective_timeout().count()};
}

std::string MpiCommunicator::who(const Call& call) const {
  return absl::StrCat("[", call.op, "] rank ", rank_, " of ", size_, " (", group_, ")");
}

void MpiCommunicator::fail(const std::string& message) {
  if (failure_.empty()) failure_ = message;
  g_failed = true;
  throw Error(message);
}

void MpiCommunicator::fail_mpi_error(const Call& call, const char* function, int code) {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());  // every MPI call, this one too
    text = mpi::error_string(mpi_, code);
  }
  fail(absl::StrCat(who(call), ": ", function, " failed: ", text));
}

void MpiCommunicator::fail_timeout(const Call& call, mpi::Request* request) {
  std::string waited_for = "its peers";
  std::string cause = "a rank has died, hung, or never joined this collective";
  if (call.peer >= 0) {
    // A point-to-point request can be withdrawn, so the late peer cannot touch the buffer.
    std::lock_guard<std::mutex> lock(mpi_mutex());
    if (mpi_.Cancel(request) == mpi::kSuccess) mpi_.Request_free(request);
    waited_for = absl::StrCat("rank ", call.peer);
    cause = absl::StrCat("it has died, hung, or never made the matching ",
                         std::string_view(call.op) == "send" ? "recv" : "send");
  }
  fail(absl::StrCat(who(call), " waited ", call.timeout_seconds, " s for ", waited_for, " ",
                    timeout_setting(), ": ", cause));
}

void MpiCommunicator::wait(const Call& call, const char* function, mpi::Request* request,
                           mpi::Status* status) {
  // Each request (each piece of a large transfer) gets the whole timeout: it measures how
  // long the peers may stall, not how long a legitimately large transfer may take.
  Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(call.timeout_seconds));
  const Clock::time_point start = Clock::now();
  for (;;) {
    int done = 0;
    int code;
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      code = mpi_.Test(request, &done, status);
    }
    if (code != mpi::kSuccess) fail_mpi_error(call, function, code);
    if (done) return;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) fail_timeout(call, request);
    pause(now - start);
  }
}

void MpiCommunicator::post_and_wait(const Call& call, const char* function,
                                    absl::FunctionRef<int(mpi::Request*)> post,
                                    mpi::Status* status) {
  mpi::Request request = nullptr;
  int code;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    code = post(&request);
  }
  if (code != mpi::kSuccess) fail_mpi_error(call, function, code);
  wait(call, function, &request, status);
}

void MpiCommunicator::for_each_chunk(int64_t count,
                                     absl::FunctionRef<void(int64_t, int)> chunk) const {
  int64_t offset = 0;
  do {
    int n = static_cast<int>(std::min<int64_t>(max_count_, count - offset));
    chunk(offset, n);
    offset += n;
  } while (offset < count);
}

void MpiCommunicator::check_rank(const char* op, const char* what, int rank) const {
  if (rank >= 0 && rank < size_) return;
  throw Error(absl::StrCat("[", op, "] ", what, " ", rank, " is not a rank of this group (", group_,
                           ", size ", size_, ")"));
}

mpi::Datatype MpiCommunicator::datatype(DType dtype) const {
  switch (dtype) {
    case DType::I32:
      return mpi_.type_int;
    case DType::I64:
      return mpi_.type_int64;
    case DType::F32:
      return mpi_.type_float;
    case DType::F64:
      return mpi_.type_double;
    default:
      break;
  }
  return nullptr;  // rejected earlier by collective_bytes
}

mpi::Op MpiCommunicator::reduce_op(ReduceOp op) const {
  switch (op) {
    case ReduceOp::kSum:
      return mpi_.op_sum;
    case ReduceOp::kMax:
      return mpi_.op_max;
    case ReduceOp::kMin:
      return mpi_.op_min;
  }
  return nullptr;
}

void MpiCommunicator::all_reduce(const void* in, void* out, int64_t count, DType dtype,
                                 ReduceOp op) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  int64_t element = collective_bytes("all_reduce", 1, dtype);
  collective_bytes("all_reduce", count, dtype);
  Call call = begin("all_reduce");
  for_each_chunk(count, [&](int64_t offset, int n) {
    // MPI forbids aliased send and receive buffers: in place is spelled MPI_IN_PLACE.
    const void* send = in == out ? mpi::in_place() : byte_at(in, offset * element);
    void* receive = byte_at(out, offset * element);
    post_and_wait(call, "MPI_Iallreduce", [&](mpi::Request* request) {
      return mpi_.Iallreduce(send, receive, n, datatype(dtype), reduce_op(op), comm_, request);
    });
  });
}

void MpiCommunicator::all_gather(const void* in, void* out, int64_t bytes) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (bytes < 0) throw Error(absl::StrCat("[all_gather] byte count ", bytes, " is negative"));
  Call call = begin("all_gather");
  void* own_block = byte_at(out, rank_ * bytes);
  if (bytes <= max_count_) {
    const void* send = in == own_block ? mpi::in_place() : in;
    post_and_wait(call, "MPI_Iallgather", [&](mpi::Request* request) {
      return mpi_.Iallgather(send, static_cast<int>(bytes), mpi_.type_byte, out,
                             static_cast<int>(bytes), mpi_.type_byte, comm_, request);
    });
    return;
  }
  // Too large for one MPI count: each rank broadcasts its block in pieces.
  if (in != own_block) std::memmove(own_block, in, bytes);
  for (int root = 0; root < size_; ++root) {
    for_each_chunk(bytes, [&](int64_t offset, int n) {
      void* piece = byte_at(out, root * bytes + offset);
      post_and_wait(call, "MPI_Ibcast", [&](mpi::Request* request) {
        return mpi_.Ibcast(piece, n, mpi_.type_byte, root, comm_, request);
      });
    });
  }
}

void MpiCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                                     ReduceOp op) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  int64_t element = collective_bytes("reduce_scatter", 1, dtype);
  collective_bytes("reduce_scatter", count, dtype);
  Call call = begin("reduce_scatter");
  if (count <= max_count_) {
    post_and_wait(call, "MPI_Ireduce_scatter_block", [&](mpi::Request* request) {
      return mpi_.Ireduce_scatter_block(in, out, static_cast<int>(count), datatype(dtype),
                                        reduce_op(op), comm_, request);
    });
    return;
  }
  // Too large for one MPI count: each block is reduced onto its rank in pieces.
  for (int root = 0; root < size_; ++root) {
    for_each_chunk(count, [&](int64_t offset, int n) {
      const void* send = byte_at(in, (root * count + offset) * element);
      void* receive = root == rank_ ? byte_at(out, offset * element) : nullptr;
      post_and_wait(call, "MPI_Ireduce", [&](mpi::Request* request) {
        return mpi_.Ireduce(send, receive, n, datatype(dtype), reduce_op(op), root, comm_, request);
      });
    });
  }
}

void MpiCommunicator::broadcast(void* data, int64_t bytes, int root) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (bytes < 0) throw Error(absl::StrCat("[broadcast] byte count ", bytes, " is negative"));
  check_rank("broadcast", "root", root);
  Call call = begin("broadcast");
  for_each_chunk(bytes, [&](int64_t offset, int n) {
    post_and_wait(call, "MPI_Ibcast", [&](mpi::Request* request) {
      return mpi_.Ibcast(byte_at(data, offset), n, mpi_.type_byte, root, comm_, request);
    });
  });
}

void MpiCommunicator::send(const void* data, int64_t bytes, int peer) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (bytes < 0) throw Error(absl::StrCat("[send] byte count ", bytes, " is negative"));
  check_rank("send", "peer", peer);
  if (peer == rank_) throw Error(absl::StrCat("[send] rank ", rank_, " cannot send to itself"));
  Call call = begin("send", peer);
  for_each_chunk(bytes, [&](int64_t offset, int n) {
    post_and_wait(call, "MPI_Isend", [&](mpi::Request* request) {
      return mpi_.Isend(byte_at(data, offset), n, mpi_.type_byte, peer, kTag, comm_, request);
    });
  });
}

void MpiCommunicator::recv(void* data, int64_t bytes, int peer) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (bytes < 0) throw Error(absl::StrCat("[recv] byte count ", bytes, " is negative"));
  check_rank("recv", "peer", peer);
  if (peer == rank_) {
    throw Error(absl::StrCat("[recv] rank ", rank_, " cannot receive from itself"));
  }
  Call call = begin("recv", peer);
  for_each_chunk(bytes, [&](int64_t offset, int n) {
    mpi::Status status;
    post_and_wait(
        call, "MPI_Irecv",
        [&](mpi::Request* request) {
          return mpi_.Irecv(byte_at(data, offset), n, mpi_.type_byte, peer, kTag, comm_, request);
        },
        &status);
    int received = 0;
    {
      std::lock_guard<std::mutex> mpi_lock(mpi_mutex());
      mpi_.Get_count(&status, mpi_.type_byte, &received);
    }
    if (received != n) {
      fail(absl::StrCat(who(call), " expected ", bytes, " bytes from rank ", peer,
                        ", but its message had ", received,
                        " (send and recv must pass the same size)"));
    }
  });
}

void MpiCommunicator::barrier() {
  std::lock_guard<std::mutex> lock(call_mutex_);
  Call call = begin("barrier");
  post_and_wait(call, "MPI_Ibarrier",
                [&](mpi::Request* request) { return mpi_.Ibarrier(comm_, request); });
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (color < 0) throw Error(absl::StrCat("[split] color ", color, " is negative"));
  Call call = begin("split");
  // MPI has no nonblocking MPI_Comm_split: gathering every rank's (color, key) first turns a
  // missing rank into a timeout here rather than a hang inside the split. The buffer is
  // leaked where that fails, since the late peer's data may still arrive into it.
  auto colors = std::make_unique<int[]>(2 + 2 * static_cast<size_t>(size_));
  colors[0] = color;
  colors[1] = key;
  try {
    post_and_wait(call, "MPI_Iallgather", [&](mpi::Request* request) {
      return mpi_.Iallgather(&colors[0], 2, mpi_.type_int, &colors[2], 2, mpi_.type_int, comm_,
                             request);
    });
  } catch (const Error&) {
    colors.release();
    throw;
  }
  mpi::Comm sub = nullptr;
  int code;
  {
    std::lock_guard<std::mutex> mpi_lock(mpi_mutex());
    code = mpi_.Comm_split(comm_, color, key, &sub);
  }
  if (code != mpi::kSuccess) fail_mpi_error(call, "MPI_Comm_split", code);
  return std::make_unique<MpiCommunicator>(mpi_, sub, /*owned=*/true, max_count_,
                                           absl::StrCat(group_, ", split color ", color));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::duplicate(const char* op) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  Call call = begin(op);
  // MPI writes the new handle when the request completes: where the wait fails, the late
  // completion may still come, so the handle's memory is leaked rather than freed.
  auto copy = std::make_unique<mpi::Comm>(nullptr);
  try {
    post_and_wait(call, "MPI_Comm_idup", [&](mpi::Request* request) {
      return mpi_.Comm_idup(comm_, copy.get(), request);
    });
  } catch (const Error&) {
    (void)copy.release();  // a late peer may still write the handle: leaked on purpose
    throw;
  }
  int code;
  {
    std::lock_guard<std::mutex> mpi_lock(mpi_mutex());
    code = mpi_.Comm_set_errhandler(*copy, mpi_.errors_return);
  }
  if (code != mpi::kSuccess) fail_mpi_error(call, "MPI_Comm_set_errhandler", code);
  return std::make_unique<MpiCommunicator>(mpi_, *copy, /*owned=*/true, max_count_, group_);
}

}  // namespace kiln::comm
