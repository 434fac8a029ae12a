#include "comm/host_collective.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/group_registry.h"
#include "kiln/error.h"

namespace kiln::comm {
namespace {

constexpr int kMaxRank = 8;

// What each rank says it is about to do, compared across the group before any data moves:
// ranks that disagree fail together with one message naming every rank's view.
struct Signature {
  int32_t kind = 0, reduction = 0, dtype = 0, axis = 0, peer = 0, rank = 0;
  int64_t shape[kMaxRank] = {};
  bool operator==(const Signature& o) const { return std::memcmp(this, &o, sizeof(o)) == 0; }
};
static_assert(sizeof(Signature) == 24 + 8 * kMaxRank);

Signature signature_of(const CollectiveCall& call) {
  Signature s;
  s.kind = static_cast<int32_t>(call.kind);
  s.reduction = static_cast<int32_t>(call.reduction);
  s.dtype = static_cast<int32_t>(call.dtype);
  s.axis = call.axis;
  s.peer = call.peer;
  s.rank = static_cast<int32_t>(call.in_shape.size());
  for (size_t i = 0; i < call.in_shape.size() && i < kMaxRank; ++i) s.shape[i] = call.in_shape[i];
  return s;
}

std::string type_text(const Signature& s) {
  std::vector<int64_t> shape(s.shape, s.shape + std::min<int32_t>(s.rank, kMaxRank));
  return absl::StrCat(dtype_name(static_cast<DType>(s.dtype)), "[", absl::StrJoin(shape, ","), "]");
}

std::string describe(const Signature& s) {
  std::string out = type_text(s);
  const auto kind = static_cast<CollectiveKind>(s.kind);
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter) {
    absl::StrAppend(&out, " ", reduction_name(static_cast<Reduction>(s.reduction)));
  }
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter) {
    absl::StrAppend(&out, " axis ", s.axis);
  }
  if (kind == CollectiveKind::kBroadcast) absl::StrAppend(&out, " root ", s.peer);
  return absl::StrCat(collective_name(kind), " of ", out);
}

std::string group_text(const Communicator& comm) {
  return absl::StrCat("rank ", comm.rank(), " of ", comm.size(), " (", comm.backend_name(), ")");
}

void check_same_call(Communicator& comm, const CollectiveCall& call) {
  const Signature mine = signature_of(call);
  std::vector<Signature> all(static_cast<size_t>(comm.size()));
  comm.all_gather(&mine, all.data(), sizeof(Signature));
  bool same = true;
  for (const Signature& s : all) same = same && s == mine;
  if (same) return;
  std::vector<std::string> views;
  for (size_t r = 0; r < all.size(); ++r)
    views.push_back(absl::StrCat("rank ", r, " called ", describe(all[r])));
  throw Error(absl::StrCat("[", collective_name(call.kind), "] the ranks of the group disagree: ",
                           absl::StrJoin(views, "; "), " (seen on ", group_text(comm), ")"));
}

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// The rows before `axis` and the elements of one row from `axis` on, for stacking blocks.
struct AxisSplit {
  int64_t outer = 1, inner = 1;
};
AxisSplit split_at(const std::vector<int64_t>& shape, int axis) {
  AxisSplit s;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i)
    (i < axis ? s.outer : s.inner) *= shape[i];
  return s;
}

// The dtype a reduction runs in: the host libraries reduce 32- and 64-bit values only, so
// narrower floats are combined in f32 and narrower integers in i32 (whose low bits a sum
// keeps exactly as the narrow integer's own wrapping sum would).
DType reduced_in(DType d) {
  switch (d) {
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::F16:
    case DType::BF16:
      return DType::F32;
    case DType::I8:
    case DType::U8:
    case DType::I16:
      return DType::I32;
    default:
      return d;
  }
}

// Calls f(From{}, To{}) with the C++ types of narrow dtype `d` and of reduced_in(d).
template <class F>
void with_narrow_types(DType d, F&& f) {
  switch (d) {
    case DType::F8E4M3:
      return f(Float8E4M3{}, float{});
    case DType::F8E5M2:
      return f(Float8E5M2{}, float{});
    case DType::F16:
      return f(Half{}, float{});
    case DType::BF16:
      return f(BFloat16{}, float{});
    case DType::I8:
      return f(int8_t{}, int32_t{});
    case DType::U8:
      return f(uint8_t{}, int32_t{});
    case DType::I16:
      return f(int16_t{}, int32_t{});
    default:
      throw Error(absl::StrCat("internal error: ", dtype_name(d), " is not a narrow dtype"));
  }
}

// n elements of narrow dtype `d` in the dtype they are reduced in, as bytes.
std::vector<char> widen(const void* data, DType d, int64_t n) {
  std::vector<char> out(static_cast<size_t>(n * dtype_size(reduced_in(d))));
  with_narrow_types(d, [&](auto narrow, auto wide) {
    using Narrow = decltype(narrow);
    using Wide = decltype(wide);
    const auto* in = static_cast<const Narrow*>(data);
    auto* to = reinterpret_cast<Wide*>(out.data());
    for (int64_t i = 0; i < n; ++i) to[i] = static_cast<Wide>(in[i]);
  });
  return out;
}

// The inverse of widen: rounds (floats) or keeps the low bits (integers) of n reduced values.
void narrow(const std::vector<char>& in, DType d, int64_t n, void* data) {
  with_narrow_types(d, [&](auto narrow_value, auto wide) {
    using Narrow = decltype(narrow_value);
    using Wide = decltype(wide);
    const auto* from = reinterpret_cast<const Wide*>(in.data());
    auto* to = static_cast<Narrow*>(data);
    for (int64_t i = 0; i < n; ++i) to[i] = static_cast<Narrow>(from[i]);
  });
}

ReduceOp reduce_op(Reduction r) {
  switch (r) {
    case Reduction::kSum:
    case Reduction::kMean:
      return ReduceOp::kSum;
    case Reduction::kMax:
      return ReduceOp::kMax;
    case Reduction::kMin:
      return ReduceOp::kMin;
  }
  return ReduceOp::kSum;
}

template <typename T>
void divide(void* data, int64_t n, int by) {
  auto* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(by));
}

// A reduction over `count` elements (all_reduce: of all; reduce_scatter: of this rank's block
// of `in`, which holds size() blocks of `count`), narrow dtypes combined as reduced_in says.
void reduce(Communicator& comm, const CollectiveCall& call, const void* in, int64_t count) {
  const bool scatter = call.kind == CollectiveKind::kReduceScatter;
  const int64_t in_count = scatter ? count * comm.size() : count;
  const ReduceOp op = reduce_op(call.reduction);
  auto run = [&](const void* src, void* dst, DType d) {
    if (scatter) {
      comm.reduce_scatter(src, dst, count, d, op);
    } else {
      comm.all_reduce(src, dst, count, d, op);
    }
  };
  const DType wide_dtype = reduced_in(call.dtype);
  if (wide_dtype != call.dtype) {
    std::vector<char> wide = widen(in, call.dtype, in_count);
    std::vector<char> result(static_cast<size_t>(count * dtype_size(wide_dtype)));
    run(wide.data(), result.data(), wide_dtype);
    if (call.reduction == Reduction::kMean) divide<float>(result.data(), count, comm.size());
    narrow(result, call.dtype, count, call.out);
    return;
  }
  run(in, call.out, call.dtype);
  if (call.reduction != Reduction::kMean) return;
  if (call.dtype == DType::F64) {
    divide<double>(call.out, count, comm.size());
  } else {
    divide<float>(call.out, count, comm.size());  // infer allows mean on floats only
  }
}

void all_gather(Communicator& comm, const CollectiveCall& call) {
  const int64_t esize = dtype_size(call.dtype);
  const AxisSplit s = split_at(call.in_shape, call.axis);
  const int64_t block = s.inner * esize;  // one rank's bytes per outer row
  if (s.outer == 1) {
    comm.all_gather(call.in, call.out, block);
    return;
  }
  // Gathered rank-major, then interleaved so that each outer row holds every rank's block.
  std::vector<char> gathered(static_cast<size_t>(s.outer * block * comm.size()));
  comm.all_gather(call.in, gathered.data(), s.outer * block);
  auto* out = static_cast<char*>(call.out);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t r = 0; r < comm.size(); ++r) {
      std::memcpy(out + (o * comm.size() + r) * block, gathered.data() + (r * s.outer + o) * block,
                  static_cast<size_t>(block));
    }
  }
}

void reduce_scatter(Communicator& comm, const CollectiveCall& call) {
  const int64_t esize = dtype_size(call.dtype);
  const AxisSplit s = split_at(call.in_shape, call.axis);
  const int64_t per_rank = s.inner / comm.size();  // elements of one rank's block per row
  if (s.outer == 1) {
    reduce(comm, call, call.in, per_rank);
    return;
  }
  // Each rank's blocks made contiguous (rank-major) first: the library scatters whole blocks.
  const int64_t block = per_rank * esize;
  std::vector<char> ranked(static_cast<size_t>(s.outer * s.inner * esize));
  const auto* in = static_cast<const char*>(call.in);
  for (int64_t r = 0; r < comm.size(); ++r) {
    for (int64_t o = 0; o < s.outer; ++o) {
      std::memcpy(ranked.data() + (r * s.outer + o) * block, in + (o * comm.size() + r) * block,
                  static_cast<size_t>(block));
    }
  }
  reduce(comm, call, ranked.data(), s.outer * per_rank);
}

// Point to point: the sender's signature travels first, so the receiver can name both
// shapes when they differ.
void send_signature(Communicator& comm, const CollectiveCall& call) {
  const Signature mine = signature_of(call);
  comm.send(&mine, sizeof(mine), call.peer);
}

void send(Communicator& comm, const CollectiveCall& call, int64_t bytes) {
  send_signature(comm, call);
  comm.send(call.in, bytes, call.peer);
  std::memcpy(call.out, call.in, static_cast<size_t>(bytes));  // send passes its operand on
}

void receive_signature(Communicator& comm, const CollectiveCall& call) {
  Signature theirs;
  comm.recv(&theirs, sizeof(theirs), call.peer);
  Signature expected = signature_of(call);
  expected.kind = static_cast<int32_t>(CollectiveKind::kSend);
  expected.peer = theirs.peer;  // the sender names this rank; that was matched by MPI
  if (!(theirs == expected)) {
    throw Error(absl::StrCat("[recv] rank ", call.peer, " sent ", type_text(theirs),
                             " but this rank expected ", type_text(expected), " (on ",
                             group_text(comm), ")"));
  }
}

void recv(Communicator& comm, const CollectiveCall& call, int64_t bytes) {
  receive_signature(comm, call);
  comm.recv(call.out, bytes, call.peer);
}

}  // namespace

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kSend:
      return "send";
    case CollectiveKind::kRecv:
      return "recv";
  }
  return "collective";
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kSum:
      return "sum";
    case Reduction::kMean:
      return "mean";
    case Reduction::kMax:
      return "max";
    case Reduction::kMin:
      return "min";
  }
  return "sum";
}

bool reduction_from_name(const std::string& name, Reduction* r) {
  for (Reduction c : {Reduction::kSum, Reduction::kMean, Reduction::kMax, Reduction::kMin}) {
    if (name == reduction_name(c)) {
      *r = c;
      return true;
    }
  }
  return false;
}

void agree_on_call(const CollectiveCall& call) {
  check_same_call(*group_info(call.group).communicator, call);
}

void announce_send(const CollectiveCall& call) {
  send_signature(*group_info(call.group).communicator, call);
}

void check_announced_send(const CollectiveCall& call) {
  receive_signature(*group_info(call.group).communicator, call);
}

int64_t collective_payload_bytes(const CollectiveCall& call) {
  return numel(call.in_shape) * dtype_size(call.dtype);
}

void run_host_collective(const CollectiveCall& call) {
  Communicator& comm = *group_info(call.group).communicator;
  const int64_t bytes = collective_payload_bytes(call);
  switch (call.kind) {
    case CollectiveKind::kSend:
      return send(comm, call, bytes);
    case CollectiveKind::kRecv:
      return recv(comm, call, bytes);
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kBroadcast:
      break;
  }
  check_same_call(comm, call);
  switch (call.kind) {
    case CollectiveKind::kAllReduce:
      return reduce(comm, call, call.in, numel(call.in_shape));
    case CollectiveKind::kAllGather:
      return all_gather(comm, call);
    case CollectiveKind::kReduceScatter:
      return reduce_scatter(comm, call);
    case CollectiveKind::kBroadcast:
      if (comm.rank() == call.peer) std::memcpy(call.out, call.in, static_cast<size_t>(bytes));
      return comm.broadcast(call.out, bytes, call.peer);
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
      break;
  }
}

}  // namespace kiln::comm
