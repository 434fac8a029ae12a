// Rendering Kernel IR as CUDA C++ for NVRTC. The source depends only on the program (ranks,
// dtypes, broadcast pattern), never on sizes: shapes, strides, offsets and scalars arrive in
// the kernel's parameter struct. A module holds the entry point <name>_i32 (32-bit index
// math, where sizes allow), <name>_i64, or both. Each takes (Params, Split): Split (the
// preamble's) tells a reduction split over several blocks which phase to run and where its
// partial results go; other kernels ignore it. docs/cuda.md says which kernel each family
// gets and when.
#ifndef KILN_RUNTIME_CUDA_CUDA_RENDERER_H_
#define KILN_RUNTIME_CUDA_CUDA_RENDERER_H_

#include <cstdint>
#include <string>

#include "jit/fusion/kernel_ir.h"

namespace kiln::runtime::cuda {

// The threads per block of every generated kernel (its __launch_bounds__): reductions and
// row norms cooperate within a block of this size, the other families use one thread per
// element or tile slot. The launcher must launch with exactly this many.
inline constexpr int kThreadsPerBlock = 256;

// Which entry points a module holds. The backend compiles only the one a launch needs (the
// 64-bit one is for tensors of 2^31 elements or more): each entry costs NVRTC time.
enum class IndexWidths { kBoth, k32, k64 };

std::string render_cuda(const jit::KernelProgram& program, IndexWidths widths = IndexWidths::kBoth);

// "<name>_i32" or "<name>_i64".
std::string entry_name(const jit::KernelProgram& program, bool wide);

// Whether a matmul runs on tensor cores: both operands f16, both bf16, or both 8-bit floats
// (staged as f16), neither a vector.
bool matmul_uses_tensor_cores(const jit::KernelProgram& program);
// Whether a matmul multiplies f32 activations with a block-quantized [N, K] weight (a plain
// load, two dims) by integer dot products (render_quantized_matmul.cc): it is tiled, and
// splits K like the tensor-core matmul.
bool matmul_reads_quantized_weight(const jit::KernelProgram& program);
// Whether a matmul is tiled through shared memory (tensor cores, quantized, or f32): its
// grid then has a block per output tile (matmul_tile_count). Others use a thread per output.
bool matmul_is_tiled(const jit::KernelProgram& program);
// The output tiles of a tiled matmul of shape `mm`, which its kernel loops over: 64x64 (f32);
// on tensor cores 128x128, or 16x128 when M <= 16; quantized 64x32, or 8x32 for 8 rows or
// fewer.
int64_t matmul_tile_count(const jit::KernelProgram& program, const jit::MatmulShape& mm);

// Whether a (arg-)reduction keeps the last axis of its operand, so the kernel puts
// consecutive outputs on consecutive lanes (coalesced) rather than a block on each output.
bool reduction_is_outer(const jit::KernelProgram& program);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUDA_RENDERER_H_
