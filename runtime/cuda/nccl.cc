// NCCL opened with dlopen, and NcclCommunicator (nccl.h): setting one up over a host
// communicator, enqueueing collectives, and one poll routine (poll_until) behind both waits,
// for a nonblocking communicator to leave ncclInProgress and for a stream to finish.
#include "runtime/cuda/nccl.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/error.h"
#include "runtime/cuda/library_loader.h"
#include "runtime/cuda/nccl_api.h"

namespace kiln::runtime::cuda {
namespace {

// Resolves every entry point of `lib` into `api`; the first one missing becomes its status.
void resolve(void* lib, const std::string& name, NcclApi& api) {
  auto sym = [&](auto& entry, const char* symbol) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(lib, symbol));
    if (entry == nullptr && api.status.ok()) {
      api.status = absl::UnavailableError(absl::StrCat(name, " lacks ", symbol));
    }
  };
  sym(api.get_version, "ncclGetVersion");
  sym(api.get_unique_id, "ncclGetUniqueId");
  sym(api.comm_init_rank, "ncclCommInitRank");
  sym(api.comm_destroy, "ncclCommDestroy");
  sym(api.comm_abort, "ncclCommAbort");
  sym(api.comm_get_async_error, "ncclCommGetAsyncError");
  sym(api.get_error_string, "ncclGetErrorString");
  sym(api.all_reduce, "ncclAllReduce");
  sym(api.all_gather, "ncclAllGather");
  sym(api.reduce_scatter, "ncclReduceScatter");
  sym(api.broadcast, "ncclBroadcast");
  sym(api.send, "ncclSend");
  sym(api.recv, "ncclRecv");
  sym(api.group_start, "ncclGroupStart");
  sym(api.group_end, "ncclGroupEnd");
  // Only for messages: an older library without it still runs.
  api.get_last_error = reinterpret_cast<NcclGetLastErrorFn>(dlsym(lib, "ncclGetLastError"));
  // Only for a bounded initialization: an older library waits in ncclCommInitRank instead.
  api.comm_init_rank_config =
      reinterpret_cast<NcclCommInitRankConfigFn>(dlsym(lib, "ncclCommInitRankConfig"));
}

NcclDataType nccl_type(DType dtype, const std::string& context) {
  switch (dtype) {
    case DType::F16:
      return NcclDataType::kFloat16;
    case DType::BF16:
      return NcclDataType::kBfloat16;
    case DType::F32:
      return NcclDataType::kFloat32;
    case DType::F64:
      return NcclDataType::kFloat64;
    case DType::I32:
      return NcclDataType::kInt32;
    case DType::I64:
      return NcclDataType::kInt64;
    case DType::I8:
      return NcclDataType::kInt8;
    case DType::U8:
      return NcclDataType::kUint8;
    default:
      break;
  }
  throw Error(absl::StrCat(context, ": dtype ", dtype_name(dtype),
                           " is not supported (i8, u8, i32, i64, f16, bf16, f32, f64 are)"));
}

NcclRedOp nccl_op(comm::ReduceOp op) {
  switch (op) {
    case comm::ReduceOp::kSum:
      return NcclRedOp::kSum;
    case comm::ReduceOp::kMax:
      return NcclRedOp::kMax;
    case comm::ReduceOp::kMin:
      return NcclRedOp::kMin;
  }
  return NcclRedOp::kSum;  // unreachable: -Werror=switch keeps the cases complete
}

// Device addresses as the pointers NCCL takes; never dereferenced on the host.
const void* in_ptr(uint64_t p) {
  return reinterpret_cast<const void*>(p);  // NOLINT(performance-no-int-to-ptr)
}
void* out_ptr(uint64_t p) {
  return reinterpret_cast<void*>(p);  // NOLINT(performance-no-int-to-ptr)
}
CUstream as_stream(void* stream) { return static_cast<CUstream>(stream); }

// Polls of a nonblocking communicator that yield before the first sleep: NCCL's launch
// thread usually finishes within them.
constexpr int kYieldingPolls = 200;

// Calls `done` until it answers true (then true) or `timeout` has passed since the first call
// (then false); `done` throws for a failure. Between calls it yields the first
// `yielding_polls` times, then sleeps from 10 us, doubling up to 1 ms.
template <typename Done>
bool poll_until(Done&& done, std::chrono::duration<double> timeout, int yielding_polls) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(10);
  for (int poll = 0;; ++poll) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() - start > timeout) return false;
    if (poll < yielding_polls) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

// KILN_NCCL_BLOCKING=1: a blocking communicator. Its collectives launch on the calling thread
// (a nonblocking one starts a thread of NCCL's per call, tens of microseconds), but its
// initialization waits for every peer with no timeout.
bool nccl_blocking_requested() {
  const char* value = std::getenv("KILN_NCCL_BLOCKING");
  return value != nullptr && std::string(value) == "1";
}

// What rank 0 broadcasts: whether it made an id, and the id.
struct IdMessage {
  int32_t ok = 0;
  NcclUniqueId id{};
};

}  // namespace

// ---------------------------------------------------------------------------------------
// The library.

std::vector<std::string> nccl_library_candidates() {
  const char* chosen = std::getenv("KILN_NCCL_LIBRARY");
  if (chosen != nullptr && *chosen != '\0') return {chosen};
  std::vector<std::string> candidates = {"libnccl.so.2"};
  // Where scripts/install-deps.sh puts the wheel: NCCL is not part of the CUDA Toolkit.
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') {
    candidates.push_back(
        absl::StrCat(home, "/.cache/kiln/tools/nccl/nvidia/nccl/lib/libnccl.so.2"));
  }
  return candidates;
}

NcclApi load_nccl_api(const std::vector<std::string>& candidates) {
  std::vector<std::string> passed_over;  // each file tried, and why it was not used
  if (std::optional<NcclApi> api = open_first_usable<NcclApi>(candidates, resolve, passed_over)) {
    return *std::move(api);
  }
  NcclApi api;
  api.status = absl::UnavailableError(
      absl::StrCat("no usable NCCL (libnccl.so.2; tried ", absl::StrJoin(passed_over, "; "),
                   "): install the PyPI wheel nvidia-nccl-cu13 (scripts/install-deps.sh puts it in "
                   "~/.cache/kiln/tools/nccl) or set KILN_NCCL_LIBRARY to a libnccl.so.2"));
  return api;
}

const NcclApi& nccl_api() {
  static const NcclApi* const loaded =
      new NcclApi(load_nccl_api(nccl_library_candidates()));  // never destroyed
  return *loaded;
}

std::string nccl_failure(const NcclApi& api, NcclResult result, const char* call) {
  const char* name = api.get_error_string != nullptr ? api.get_error_string(result) : nullptr;
  std::string text = absl::StrCat(call, " failed: ", name != nullptr ? name : "NCCL error", " (",
                                  static_cast<int>(result), ")");
  const char* last = api.get_last_error != nullptr ? api.get_last_error(nullptr) : nullptr;
  if (last != nullptr && *last != '\0') absl::StrAppend(&text, ": ", last);
  return text;
}

// ---------------------------------------------------------------------------------------
// The communicator.

NcclCommunicator::NcclCommunicator(comm::Communicator& host) : NcclCommunicator(host, nccl_api()) {}

NcclCommunicator::NcclCommunicator(comm::Communicator& host, const NcclApi& api)
    : api_(api), rank_(host.rank()), size_(host.size()) {
  initialize(host);
}

// ncclCommDestroy returns at once, freeing nothing, unless the communicator's state is
// success; abort is the way out of every other state.
NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  NcclResult state = NcclResult::kInternalError;
  const bool healthy = !in_group_ && pending_.empty() &&
                       api_.comm_get_async_error(comm_, &state) == NcclResult::kSuccess &&
                       state == NcclResult::kSuccess;
  if (healthy) {
    api_.comm_destroy(comm_);
  } else {
    abort();
  }
}

// Every rank takes part in each host collective below whatever happened before, so that one
// rank's failure is every rank's error rather than the others' wait for a timeout.
void NcclCommunicator::initialize(comm::Communicator& host) {
  const std::string where = context("nccl_init");
  int32_t usable = api_.status.ok() ? 1 : 0;
  host.all_reduce(&usable, &usable, 1, DType::I32, comm::ReduceOp::kMin);
  if (!api_.status.ok()) throw Error(absl::StrCat(where, ": ", api_.status.message()));
  if (usable == 0) throw Error(absl::StrCat(where, ": NCCL is missing on another rank"));

  IdMessage message;
  NcclResult made = NcclResult::kSuccess;
  if (rank_ == 0) {
    made = api_.get_unique_id(&message.id);
    message.ok = made == NcclResult::kSuccess ? 1 : 0;
  }
  host.broadcast(&message, sizeof(message), 0);
  if (made != NcclResult::kSuccess) {
    throw Error(absl::StrCat(where, ": ", nccl_failure(api_, made, "ncclGetUniqueId")));
  }
  if (message.ok == 0) throw Error(absl::StrCat(where, ": rank 0 could not make NCCL's id"));

  if (api_.comm_init_rank_config == nullptr) {
    NcclComm comm = nullptr;
    const NcclResult result = api_.comm_init_rank(&comm, size_, message.id, rank_);
    if (result != NcclResult::kSuccess) {
      throw Error(absl::StrCat(where, ": ", nccl_failure(api_, result, "ncclCommInitRank")));
    }
    comm_ = comm;
    return;
  }
  // Nonblocking: the call returns while NCCL connects to the peers on its own thread, and
  // wait_until_ready() gives up after KILN_DIST_TIMEOUT where a peer never comes.
  NcclConfig config;
  config.blocking = nccl_blocking_requested() ? 1 : 0;
  comm::collective_timeout();  // a bad KILN_DIST_TIMEOUT throws before NCCL makes anything
  NcclComm comm = nullptr;
  const NcclResult result = api_.comm_init_rank_config(&comm, size_, message.id, rank_, &config);
  comm_ = comm;
  if (result != NcclResult::kSuccess && result != NcclResult::kInProgress) {
    abort();
    throw Error(absl::StrCat(where, ": ", nccl_failure(api_, result, "ncclCommInitRankConfig")));
  }
  wait_until_ready("nccl_init", "ncclCommInitRankConfig");
}

// A nonblocking communicator answers ncclInProgress to every call that launches work (the
// initialization, each collective, ncclGroupEnd): NCCL does it on a thread of its own, and the
// state leaves ncclInProgress when that thread is done; nothing else may be called before.
// The first polls only yield, since a collective's launch is done within tens of microseconds.
void NcclCommunicator::wait_until_ready(const std::string& op, const char* call) {
  if (comm_ == nullptr) fail(op, absl::StrCat(call, " made no communicator"));
  const auto timeout = comm::collective_timeout();
  const bool ready = poll_until(
      [&] {
        NcclResult state = NcclResult::kSuccess;
        const NcclResult asked = api_.comm_get_async_error(comm_, &state);
        if (asked != NcclResult::kSuccess) {
          fail(op, nccl_failure(api_, asked, "ncclCommGetAsyncError"));
        }
        if (state == NcclResult::kSuccess) return true;
        if (state != NcclResult::kInProgress) {
          fail(op,
               absl::StrCat(nccl_failure(api_, state, call), "; NCCL's communicator was aborted"));
        }
        return false;
      },
      timeout, kYieldingPolls);
  if (!ready) {
    fail(op, absl::StrCat(call, " not done after ", timeout.count(),
                          " s (KILN_DIST_TIMEOUT): a peer never joined, died or is stuck; "
                          "NCCL's communicator was aborted"));
  }
}

std::string NcclCommunicator::context(const std::string& op) const {
  return absl::StrCat("[", op, "] rank ", rank_, " of ", size_, " (nccl)");
}

void NcclCommunicator::check_usable(const char* op) const {
  if (!failure_.empty()) {
    throw Error(absl::StrCat(context(op), ": the group failed earlier: ", failure_));
  }
}

// Argument errors are found before NCCL is called: nothing was enqueued, so they leave the
// group usable.
NcclDataType NcclCommunicator::prepare(const char* op, int64_t count, DType dtype) const {
  check_usable(op);
  if (count < 0) throw Error(absl::StrCat(context(op), ": count ", count, " is negative"));
  return nccl_type(dtype, context(op));
}

void NcclCommunicator::check_rank(const char* op, const char* what, int r) const {
  if (r < 0 || r >= size_) {
    throw Error(absl::StrCat(context(op), ": ", what, " ", r, " is not a rank of ", size_));
  }
}

void NcclCommunicator::check(NcclResult result, const char* op, const char* call) {
  if (result == NcclResult::kInProgress) {
    wait_until_ready(op, call);
  } else if (result != NcclResult::kSuccess) {
    fail(op, nccl_failure(api_, result, call));
  }
}

// NCCL's communicator is aborted, not left half-used: peers blocked in a collective with this
// rank then fail by their own timeout or NCCL's error, not hang.
void NcclCommunicator::fail(const std::string& op, const std::string& why) {
  abort();
  failure_ = absl::StrCat("[", op, "] ", why);
  throw Error(absl::StrCat(context(op), ": ", why));
}

// A group still open on this thread would only queue the abort (NCCL runs a group's calls at
// its end), so it is closed first, whatever it answers.
void NcclCommunicator::abort() {
  if (in_group_) {
    in_group_ = false;
    api_.group_end();
  }
  if (comm_ != nullptr) api_.comm_abort(comm_);
  comm_ = nullptr;
  pending_.clear();
}

void NcclCommunicator::all_reduce(uint64_t in, uint64_t out, int64_t count, DType dtype,
                                  comm::ReduceOp op, void* stream) {
  constexpr const char* kOp = "all_reduce";
  const NcclDataType type = prepare(kOp, count, dtype);
  check(api_.all_reduce(in_ptr(in), out_ptr(out), static_cast<size_t>(count), type, nccl_op(op),
                        comm_, as_stream(stream)),
        kOp, "ncclAllReduce");
  enqueued(kOp, stream);
}

void NcclCommunicator::all_gather(uint64_t in, uint64_t out, int64_t count, DType dtype,
                                  void* stream) {
  constexpr const char* kOp = "all_gather";
  const NcclDataType type = prepare(kOp, count, dtype);
  check(api_.all_gather(in_ptr(in), out_ptr(out), static_cast<size_t>(count), type, comm_,
                        as_stream(stream)),
        kOp, "ncclAllGather");
  enqueued(kOp, stream);
}

void NcclCommunicator::reduce_scatter(uint64_t in, uint64_t out, int64_t count, DType dtype,
                                      comm::ReduceOp op, void* stream) {
  constexpr const char* kOp = "reduce_scatter";
  const NcclDataType type = prepare(kOp, count, dtype);
  check(api_.reduce_scatter(in_ptr(in), out_ptr(out), static_cast<size_t>(count), type, nccl_op(op),
                            comm_, as_stream(stream)),
        kOp, "ncclReduceScatter");
  enqueued(kOp, stream);
}

void NcclCommunicator::broadcast(uint64_t data, int64_t count, DType dtype, int root,
                                 void* stream) {
  constexpr const char* kOp = "broadcast";
  const NcclDataType type = prepare(kOp, count, dtype);
  check_rank(kOp, "root", root);
  check(api_.broadcast(in_ptr(data), out_ptr(data), static_cast<size_t>(count), type, root, comm_,
                       as_stream(stream)),
        kOp, "ncclBroadcast");
  enqueued(kOp, stream);
}

void NcclCommunicator::send(uint64_t data, int64_t count, DType dtype, int peer, void* stream) {
  constexpr const char* kOp = "send";
  const NcclDataType type = prepare(kOp, count, dtype);
  check_rank(kOp, "peer", peer);
  check(api_.send(in_ptr(data), static_cast<size_t>(count), type, peer, comm_, as_stream(stream)),
        kOp, "ncclSend");
  enqueued(kOp, stream);
}

void NcclCommunicator::recv(uint64_t data, int64_t count, DType dtype, int peer, void* stream) {
  constexpr const char* kOp = "recv";
  const NcclDataType type = prepare(kOp, count, dtype);
  check_rank(kOp, "peer", peer);
  check(api_.recv(out_ptr(data), static_cast<size_t>(count), type, peer, comm_, as_stream(stream)),
        kOp, "ncclRecv");
  enqueued(kOp, stream);
}

void NcclCommunicator::group_start() {
  check_usable("group_start");
  check(api_.group_start(), "group_start", "ncclGroupStart");
  in_group_ = true;
}

void NcclCommunicator::group_end() {
  check_usable("group_end");
  in_group_ = false;
  check(api_.group_end(), "group_end", "ncclGroupEnd");
}

// Polls rather than blocks in cuStreamSynchronize: a collective whose peer never comes never
// finishes, and only a poll can give up on it (and only ncclCommAbort frees the GPU from it).
void NcclCommunicator::wait(void* stream, const std::function<bool()>& stream_done) {
  const auto found = pending_.find(stream);
  const std::string op = found != pending_.end() ? found->second : "wait";
  check_usable(op.c_str());
  const auto timeout = comm::collective_timeout();
  const bool done = poll_until(
      [&] {
        if (stream_done()) return true;
        NcclResult async_error = NcclResult::kSuccess;
        check(api_.comm_get_async_error(comm_, &async_error), op.c_str(), "ncclCommGetAsyncError");
        if (async_error != NcclResult::kSuccess && async_error != NcclResult::kInProgress) {
          fail(op, absl::StrCat(nccl_failure(api_, async_error, "NCCL (asynchronously)"),
                                "; NCCL's communicator was aborted"));
        }
        return false;
      },
      timeout, /*yielding_polls=*/0);
  if (!done) {
    fail(op, absl::StrCat("not done after ", timeout.count(),
                          " s (KILN_DIST_TIMEOUT): a peer did not take part, died or is "
                          "stuck; NCCL's communicator was aborted"));
  }
  pending_.erase(stream);
}

}  // namespace kiln::runtime::cuda
