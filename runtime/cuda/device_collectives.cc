#include "runtime/cuda/device_collectives.h"

#include <cstdio>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/group_registry.h"
#include "kiln/error.h"
#include "ops/collective.h"

namespace kiln::runtime::cuda {
namespace {

constexpr CUresult kNotReady = 600;  // CUDA_ERROR_NOT_READY: cuStreamQuery's "still running"

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

int64_t bytes_of(const std::vector<int64_t>& shape, DType dtype) {
  return numel(shape) * dtype_size(dtype);
}

// The rows before the call's axis: NCCL gathers and scatters whole blocks, which is the
// stacking along an axis only when nothing comes before it.
int64_t rows_before_axis(const comm::CollectiveCall& call) {
  int64_t rows = 1;
  for (int i = 0; i < call.axis; ++i) rows *= call.in_shape[static_cast<size_t>(i)];
  return rows;
}

bool is_point_to_point(const comm::CollectiveCall& call) {
  return call.kind == comm::CollectiveKind::kSend || call.kind == comm::CollectiveKind::kRecv;
}

comm::ReduceOp reduce_op(comm::Reduction r) {
  return r == comm::Reduction::kMax   ? comm::ReduceOp::kMax
         : r == comm::Reduction::kMin ? comm::ReduceOp::kMin
                                      : comm::ReduceOp::kSum;
}

comm::CollectiveCall call_of(const jit::KernelProgram& program, const jit::KernelLaunch& launch) {
  const ops::ValueType in{launch.spaces[1], program.anchor_dtype};
  const ops::ValueType out{launch.spaces[0], program.anchor_dtype};
  return ops::collective_call(program.anchor_op, program.anchor_attrs, in, out, nullptr, nullptr);
}

}  // namespace

DeviceCollectives::DeviceCollectives(const DriverApi& api, CUstream stream, std::string device_name)
    : api_(api), stream_(stream), device_name_(std::move(device_name)) {}

DeviceCollectives::~DeviceCollectives() = default;

std::string DeviceCollectives::unsupported_by_nccl(const comm::CollectiveCall& call) {
  const bool reduces = call.kind == comm::CollectiveKind::kAllReduce ||
                       call.kind == comm::CollectiveKind::kReduceScatter;
  if (reduces && call.reduction == comm::Reduction::kMean) return "NCCL path has no mean";
  if (call.dtype == DType::Bool) return "NCCL has no bool type";
  // NCCL has no i16; its 8-bit float types are newer than the library Kiln asks for.
  if (call.dtype == DType::I16 || call.dtype == DType::F8E4M3 || call.dtype == DType::F8E5M2) {
    return absl::StrCat("Kiln does not hand ", dtype_name(call.dtype), " to NCCL");
  }
  const bool stacks = call.kind == comm::CollectiveKind::kAllGather ||
                      call.kind == comm::CollectiveKind::kReduceScatter;
  if (stacks && rows_before_axis(call) > 1) {
    return absl::StrCat("NCCL stacks blocks along the first axis only, not axis ", call.axis);
  }
  return "";
}

NcclCommunicator* DeviceCollectives::nccl(int group) {
  if (auto it = nccl_.find(group); it != nccl_.end()) return it->second.get();
  if (why_not_.contains(group)) return nullptr;
  comm::Communicator& host = *comm::group_info(group).communicator;
  std::unique_ptr<NcclCommunicator> made;
  std::string why;
  try {
    made = std::make_unique<NcclCommunicator>(host);
  } catch (const Error& e) {
    why = e.what();
  }
  // Every rank must take the same path: NCCL only where it started on all of them.
  const int32_t ok = made != nullptr ? 1 : 0;
  int32_t all_ok = 0;
  host.all_reduce(&ok, &all_ok, 1, DType::I32, comm::ReduceOp::kMin);
  if (all_ok == 1) {
    NcclCommunicator* n = made.get();
    nccl_[group] = std::move(made);
    return n;
  }
  made.reset();
  if (why.empty()) why = "NCCL did not start on another rank of the group";
  why_not_[group] = why;
  std::fprintf(stderr,
               "[kiln] collectives of process group %d on %s are staged through host memory: "
               "NCCL did not start (%s)\n",
               group, device_name_.c_str(), why.c_str());
  return nullptr;
}

std::string DeviceCollectives::describe(const jit::KernelProgram& program,
                                        const jit::KernelLaunch& launch) {
  const comm::CollectiveCall call = call_of(program, launch);
  if (std::string why = unsupported_by_nccl(call); !why.empty()) {
    return absl::StrCat("staged through host memory (", why, ")");
  }
  if (nccl_.contains(call.group)) return "nccl";
  if (auto it = why_not_.find(call.group); it != why_not_.end()) {
    return absl::StrCat("staged through host memory (", it->second, ")");
  }
  if (is_point_to_point(call)) {
    return "staged through host memory until a collective of the whole group starts NCCL";
  }
  return "nccl, once it starts for this group (else staged through host memory)";
}

void DeviceCollectives::run(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                            uint64_t in, uint64_t out) {
  const comm::CollectiveCall call = call_of(program, launch);
  // NCCL starts at a collective of the whole group (every rank takes part in setting it up),
  // never at a send or recv, which only two ranks make.
  NcclCommunicator* n = nullptr;
  if (unsupported_by_nccl(call).empty()) {
    if (!is_point_to_point(call)) {
      n = nccl(call.group);
    } else if (auto it = nccl_.find(call.group); it != nccl_.end()) {
      n = it->second.get();
    }
  }
  if (n != nullptr) {
    run_nccl(*n, call, in, out);
  } else {
    run_staged(call, in, out);
  }
}

void DeviceCollectives::run_nccl(NcclCommunicator& nccl, const comm::CollectiveCall& call,
                                 uint64_t in, uint64_t out) {
  const int64_t count = numel(call.in_shape);
  const DType dt = call.dtype;
  const comm::ReduceOp op = reduce_op(call.reduction);
  switch (call.kind) {
    case comm::CollectiveKind::kAllReduce:
      comm::agree_on_call(call);
      nccl.all_reduce(in, out, count, dt, op, stream_);
      break;
    case comm::CollectiveKind::kAllGather:
      comm::agree_on_call(call);
      nccl.all_gather(in, out, count, dt, stream_);
      break;
    case comm::CollectiveKind::kReduceScatter:
      comm::agree_on_call(call);
      nccl.reduce_scatter(in, out, numel(call.out_shape), dt, op, stream_);
      break;
    case comm::CollectiveKind::kBroadcast:
      comm::agree_on_call(call);
      if (nccl.rank() == call.peer) copy_on_device(out, in, bytes_of(call.in_shape, dt));
      nccl.broadcast(out, count, dt, call.peer, stream_);
      break;
    case comm::CollectiveKind::kSend:
      comm::announce_send(call);
      nccl.send(in, count, dt, call.peer, stream_);
      copy_on_device(out, in, bytes_of(call.in_shape, dt));  // send passes its operand on
      break;
    case comm::CollectiveKind::kRecv:
      comm::check_announced_send(call);
      nccl.recv(out, count, dt, call.peer, stream_);
      break;
  }
  nccl.wait(stream_, [this] {
    const CUresult r = api_.stream_query(stream_);
    if (r == kNotReady) return false;
    check(r, "cuStreamQuery");
    return true;
  });
}

void DeviceCollectives::run_staged(comm::CollectiveCall call, uint64_t in, uint64_t out) {
  const int64_t in_bytes = bytes_of(call.in_shape, call.dtype);
  const int64_t out_bytes = bytes_of(call.out_shape, call.dtype);
  std::vector<char> host_in(static_cast<size_t>(in_bytes));
  std::vector<char> host_out(static_cast<size_t>(out_bytes));
  if (in != 0 && in_bytes > 0) {
    check(api_.memcpy_dtoh_async(host_in.data(), in, static_cast<size_t>(in_bytes), stream_),
          "cuMemcpyDtoHAsync");
  }
  check(api_.stream_synchronize(stream_), "cuStreamSynchronize");  // host_in is complete
  call.in = host_in.data();
  call.out = host_out.data();
  comm::run_host_collective(call);
  if (out_bytes > 0) {
    check(api_.memcpy_htod_async(out, host_out.data(), static_cast<size_t>(out_bytes), stream_),
          "cuMemcpyHtoDAsync");
  }
  check(api_.stream_synchronize(stream_), "cuStreamSynchronize");  // host_out may go now
}

void DeviceCollectives::copy_on_device(uint64_t to, uint64_t from, int64_t bytes) {
  if (bytes == 0) return;
  check(api_.memcpy_dtod_async(to, from, static_cast<size_t>(bytes), stream_), "cuMemcpyDtoDAsync");
}

void DeviceCollectives::check(CUresult result, const char* call) const {
  absl::Status s = check_cuda(result, call);
  if (!s.ok()) throw Error(absl::StrCat(device_name_, ": ", s.message()));
}

}  // namespace kiln::runtime::cuda
