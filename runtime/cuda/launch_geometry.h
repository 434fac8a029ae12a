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

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_LAUNCH_GEOMETRY_H_
