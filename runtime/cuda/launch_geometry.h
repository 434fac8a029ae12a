// How many blocks a generated kernel launches with (the threads per block are the renderer's
// block_size). Shared by the CUDA backend and the tests that run kernels on the host.
#ifndef KILN_RUNTIME_CUDA_LAUNCH_GEOMETRY_H_
#define KILN_RUNTIME_CUDA_LAUNCH_GEOMETRY_H_

#include <cstdint>

#include "jit/kernel_ir.h"

namespace kiln::runtime::cuda {

// Grid-stride kernels get enough blocks to fill the GPU; kernels that give a block to each
// output (reductions) or row (norms) get one per item; never more than 32 per SM.
int64_t grid_size(const jit::KernelProgram& program, const jit::KernelLaunch& launch, int sm_count);

// The dynamic shared memory a block gets: a row norm's whole row when it fits in the 48 KiB
// every GPU allows without opting in (the kernel then reads the row from global memory
// once), else none (it reads the row once per pass).
int dynamic_shared_bytes(const jit::KernelProgram& program, const jit::KernelLaunch& launch);
inline constexpr int kDefaultSharedLimit = 48 * 1024;

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_LAUNCH_GEOMETRY_H_
