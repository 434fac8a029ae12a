#include "runtime/cuda/launch_geometry.h"

#include <algorithm>

#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {
namespace {

bool is_reduction(const jit::KernelProgram& program) {
  return program.anchor == jit::AnchorKind::kReduce ||
         program.anchor == jit::AnchorKind::kArgReduce;
}

// The blocks a kernel's work divides into before any cap.
int64_t work_items(const jit::KernelProgram& program, const jit::KernelLaunch& launch, int block) {
  const int64_t out = ops::numel(launch.spaces[0]);
  if (is_reduction(program)) {
    if (reduction_is_outer(program)) return (out + 31) / 32;
    const int64_t per_block = inner_reduction_outputs_per_block(out);
    return (out + per_block - 1) / per_block;
  }
  if (matmul_is_tiled(program)) return matmul_tile_count(program, jit::matmul_shape(launch));
  if (program.anchor == jit::AnchorKind::kRowNorm || program.anchor == jit::AnchorKind::kScan ||
      program.anchor == jit::AnchorKind::kTopk) {  // a block per row
    return jit::row_norm_shape(program, launch).rows();
  }
  if (program.anchor == jit::AnchorKind::kAttention) {  // a block per query row, or per 128
    const ops::Shape& q = launch.spaces[1];
    int64_t rows = 1;  // query rows of every batch·head
    for (size_t d = 0; d + 1 < q.size(); ++d) rows *= q[d];
    const int64_t sq = q[q.size() - 2];
    if (!attention_uses_tensor_cores(program, launch) || sq == 0) return rows;
    return rows / sq * ((sq + 127) / 128);
  }
  if (program.anchor == jit::AnchorKind::kUpdateSlice ||
      program.anchor == jit::AnchorKind::kIndexAdd) {  // a thread per element of the update
    return (ops::numel(launch.spaces[1]) + block - 1) / block;
  }
  if (program.anchor == jit::AnchorKind::kNone) {  // a thread per vector of E elements
    const int64_t e = pointwise_vector_width(program);
    return ((out + e - 1) / e + block - 1) / block;
  }
  return (out + block - 1) / block;
}

// The row of a row norm or topk, if it fits in `limit`; nothing for other kernels (a scan
// reads each element once).
int dynamic_shared_bytes(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                         int limit) {
  if (program.anchor != jit::AnchorKind::kRowNorm && program.anchor != jit::AnchorKind::kTopk) {
    return 0;
  }
  // The cache holds the operand's register type: float for f16, bf16 and f32, else 8 bytes.
  const DType operand = program.instrs[program.anchor_operands[0]].dtype;
  const int64_t element = jit::register_class(operand) == jit::RegisterClass::kFloat ? 4 : 8;
  const int64_t bytes = jit::row_norm_shape(program, launch).extent * element;
  return bytes <= limit ? static_cast<int>(bytes) : 0;
}

// The two launches of a kernel split over gridDim.y (split-K, or a split reduction): phase 1
// runs `step`'s grid once per chunk and writes each chunk's partial results to scratch;
// phase 2 combines them, a thread per output. `partial_bytes`: the scratch one chunk needs
// per output.
LaunchSchedule two_phase_split(const jit::KernelLaunch& launch, const LaunchStep& step,
                               int64_t chunks, int64_t cap, int64_t partial_bytes) {
  const int64_t outputs = ops::numel(launch.spaces[0]);
  LaunchStep partials = step;
  partials.grid_y = chunks;
  partials.phase = 1;
  partials.chunks = chunks;
  LaunchStep combine = partials;
  combine.grid_x = std::clamp<int64_t>((outputs + combine.block - 1) / combine.block, 1, cap);
  combine.grid_y = 1;
  combine.phase = 2;
  LaunchSchedule schedule;
  schedule.steps = {partials, combine};
  schedule.scratch_bytes = chunks * outputs * partial_bytes;
  return schedule;
}

// A tensor-core or quantized matmul whose tiles give fewer than 4 blocks per SM (decode:
// M = 1 gives N / 128 tiles of 16x128) splits its k-steps into chunks over gridDim.y, at
// least 128 deep (4 steps of 32) on tensor cores or 512 (2 steps of 256) quantized, and at
// most 64 chunks: phase 1 writes each chunk's f32 partial tile to scratch, phase 2 sums them
// in chunk order (the same bits every run) and runs the epilogue, a thread per output.
// False, and nothing set, when K is too short to split.
bool split_k(const jit::KernelProgram& program, const jit::KernelLaunch& launch, int64_t tiles,
             int64_t target, int64_t cap, const LaunchStep& step, LaunchSchedule& schedule) {
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  const bool quantized = matmul_reads_quantized_weight(program);
  const int64_t depth = quantized ? 256 : 32, least = quantized ? 2 : 4;  // as the kernels step
  const int64_t steps = (mm.k + depth - 1) / depth;
  int64_t chunks = std::min({(target + tiles - 1) / tiles, steps / least, int64_t{64}});
  if (chunks < 2) return false;
  const int64_t per_chunk = (steps + chunks - 1) / chunks;   // as the kernel cuts them
  chunks = (steps + per_chunk - 1) / per_chunk;              // none left empty
  schedule = two_phase_split(launch, step, chunks, cap, 4);  // an f32 partial per output
  return true;
}

}  // namespace

LaunchSchedule schedule_launches(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                                 int sm_count, int dynamic_shared_limit, bool allow_split) {
  const int64_t cap = int64_t{sm_count} * 32;
  LaunchStep step;
  step.block = kThreadsPerBlock;
  const int64_t items = work_items(program, launch, step.block);
  step.grid_x = std::clamp<int64_t>(items, 1, cap);
  step.shared_bytes = dynamic_shared_bytes(program, launch, dynamic_shared_limit);
  LaunchSchedule schedule;
  const int64_t target = int64_t{4} * sm_count;
  // An empty output has no tiles to split (and the chunk counts below divide by them).
  if (items == 0) {
    schedule.steps.push_back(step);
    return schedule;
  }
  if (allow_split && items < target &&
      (matmul_uses_tensor_cores(program) || matmul_reads_quantized_weight(program))) {
    if (split_k(program, launch, items, target, cap, step, schedule)) return schedule;
  }
  const int64_t extent = is_reduction(program) ? jit::reduced_extent(launch) : 0;
  if (!allow_split || !is_reduction(program) || items >= target || extent < 4096) {
    schedule.steps.push_back(step);
    return schedule;
  }
  const int64_t chunks =
      std::clamp<int64_t>(std::min((target + items - 1) / items, extent / 2048), 2, 1024);
  return two_phase_split(launch, step, chunks, cap, 16);  // an 8-byte value and an 8-byte index
}

}  // namespace kiln::runtime::cuda
