// How a generated kernel is launched: its grid, its dynamic shared memory, and for a
// reduction split over several blocks per output, the two launches (partials, then their
// combination) and the scratch memory between them. Shared by the CUDA backend and the
// tests that run kernels on the host, so both launch exactly alike.
#ifndef KILN_RUNTIME_CUDA_LAUNCH_GEOMETRY_H_
#define KILN_RUNTIME_CUDA_LAUNCH_GEOMETRY_H_

#include <cstdint>
#include <vector>

#include "jit/fusion/kernel_ir.h"

namespace kiln::runtime::cuda {

// One launch of a module's entry point.
struct LaunchStep {
  int64_t grid_x = 1, grid_y = 1;
  int block = 256;
  int shared_bytes = 0;  // dynamic shared memory per block
  int64_t phase = 0;     // the Split argument: 0 unsplit, 1 partials, 2 combination
  int64_t chunks = 1;
};

struct LaunchSchedule {
  std::vector<LaunchStep> steps;
  int64_t scratch_bytes = 0;  // the Split argument's scratch (phase 1 writes, 2 reads)
};

// Grid-stride kernels get enough blocks to fill the GPU, counted in the vectors a thread
// takes (pointwise_vector_width); kernels that give a block to each 8 outputs (inner
// reductions; fewer outputs than 8 share one block's warps), 32 outputs (outer
// reductions), row (row norms, scans, topk) or output tile (tiled matmuls:
// matmul_tile_count) get one per item; never more than 32 per SM. A reduction whose outputs
// give fewer than 4 blocks per SM and whose extent is long splits the extent into chunks (at
// least 2048 elements each) over gridDim.y, unless `allow_split` is false; so does a
// tensor-core matmul with fewer tiles than that and a long K (split-K, at least 128 deep per
// chunk). A row norm's or topk's block gets its whole row as dynamic shared memory when it
// fits in `dynamic_shared_limit` (the kernel then reads the row from global memory once),
// else none (it reads the row once per pass). That limit is what the kernel may ask for
// beside its own static shared arrays: the backend opts each kernel in to the device's
// maximum (227 KiB on Hopper) less its static size, as the driver reports it.
LaunchSchedule schedule_launches(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                                 int sm_count, int dynamic_shared_limit, bool allow_split = true);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_LAUNCH_GEOMETRY_H_
