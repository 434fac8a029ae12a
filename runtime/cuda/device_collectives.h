// Collectives (kiln/distributed.h) on CUDA tensors: NCCL on the device's stream, where NCCL
// starts for the group; else staged through host memory over the group's host communicator
// (MPI), as when NCCL is missing or, as on a machine without a GPU, cannot initialize. The
// choice is made once per group and said once on stderr and in every plan dump.
//
// Either way, before any data moves the ranks check that they agree on the call (dtype,
// shape, reduction) over the host communicator, and a collective returns once its result is
// complete on the stream: NCCL's wait turns a peer that never takes part into a kiln::Error
// after KILN_DIST_TIMEOUT, as the host path does.
#ifndef KILN_RUNTIME_CUDA_DEVICE_COLLECTIVES_H_
#define KILN_RUNTIME_CUDA_DEVICE_COLLECTIVES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "comm/host_collective.h"
#include "jit/fusion/kernel_ir.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nccl.h"

namespace kiln::runtime::cuda {

class DeviceCollectives {
 public:
  // `api`'s context for the device must be current whenever a method runs.
  DeviceCollectives(const DriverApi& api, CUstream stream, std::string device_name);
  ~DeviceCollectives();

  // Runs the collective kernel `program` with `launch` over device buffers `in` (0 for
  // recv, which reads nothing) and `out`, on the stream.
  void run(const jit::KernelProgram& program, const jit::KernelLaunch& launch, uint64_t in,
           uint64_t out);
  // How run() moves this kernel's bytes: "nccl", or "staged through host memory (why)".
  std::string describe(const jit::KernelProgram& program, const jit::KernelLaunch& launch);

 private:
  // Why NCCL does not take `call` whatever the group (a mean, an inner axis, bools), or "".
  static std::string unsupported_by_nccl(const comm::CollectiveCall& call);
  // The group's NCCL communicator, made on first need (collective over the group); nullptr
  // when NCCL cannot start for it (why_not_ says why).
  NcclCommunicator* nccl(int group);
  void run_nccl(NcclCommunicator& nccl, const comm::CollectiveCall& call, uint64_t in,
                uint64_t out);
  void run_staged(comm::CollectiveCall call, uint64_t in, uint64_t out);
  void copy_on_device(uint64_t to, uint64_t from, int64_t bytes);
  void check(CUresult result, const char* call) const;

  const DriverApi& api_;
  CUstream stream_;
  std::string device_name_;
  std::map<int, std::unique_ptr<NcclCommunicator>> nccl_;
  std::map<int, std::string> why_not_;
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_DEVICE_COLLECTIVES_H_
