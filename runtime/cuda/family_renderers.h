// The kernel families render_cuda dispatches to (docs/cuda.md says which kernel each gets
// and when). Each returns the statements of `body<I>(const Params& a, const Split& split)`,
// the function every entry point of the module calls; the custom kernel, a user's whole
// kernel, returns the module itself.
#ifndef KILN_RUNTIME_CUDA_FAMILY_RENDERERS_H_
#define KILN_RUNTIME_CUDA_FAMILY_RENDERERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "jit/fusion/kernel_ir.h"
#include "runtime/cuda/kernel_writer.h"

namespace kiln::runtime::cuda {

// Pointwise programs (no anchor): vectorized 16-byte loads and stores where the layout
// allows, one thread per element otherwise.
std::string render_pointwise(const KernelWriter& writer);
// The widest element, in bytes, that space `space` of `program` loads, for the families' 16-byte
// paths: -1 when the space rules a vector path out (an index leaf or a gather needs every
// element's own multi-index, or a load goes through a general strided view: a transpose or
// slice, rarely vectorizable, whose vector path would only add code and compile time); 0
// when the space loads nothing.
int widest_vector_load(const jit::KernelProgram& program, int space);
// The elements each thread of a pointwise kernel takes per step: E for the 16-byte path
// (when the launch allows it), 1 when the program has none. The grid is sized in these.
int pointwise_vector_width(const jit::KernelProgram& program);
// Outputs per block of an inner reduction: a warp each (8), or for fewer outputs than
// warps, the largest power of two not above them, so teams of warps share each output.
inline int64_t inner_reduction_outputs_per_block(int64_t outputs) {
  return outputs >= 8 ? 8 : outputs >= 4 ? 4 : outputs >= 2 ? 2 : 1;
}

// Reductions and arg-reductions: a warp per output (inner) or a block per 32 outputs
// (outer), optionally split over gridDim.y.
std::string render_reduction(const KernelWriter& writer);

// Row ops, a block per row. Softmax, log_softmax, layer_norm and rms_norm (kRowNorm):
std::string render_row_norm(const KernelWriter& writer);
// cumsum (kScan): a block-wide scan over each chunk of the row, carried to the next;
std::string render_cumsum(const KernelWriter& writer);
// topk_indices (kTopk): k rounds of a block-wide select, each after the last one's pick.
std::string render_topk(const KernelWriter& writer);
// Their shared parts (render_row_norm.cc): the row loop, opened with extent, rows and idx1
// set to the row's start (the caller closes it), and inside it the row's cache in dynamic
// shared memory (declare_row_cache: row_cache, and `persistent` when the launch gave room for the
// whole row).
std::string open_row_loop(const KernelWriter& writer);
std::string declare_row_cache(const std::string& cached);
// The run-time test that space 1's loads can be read as E-element vectors along `axis` (of
// a rank-`rank` space 1): every input pointer 16-byte aligned, and each load's view steps by
// 1 along the axis with an offset and other strides that are multiples of E. Terms are joined
// by `joiner` (the caller's line break and indent).
std::string vector_rows_condition(const jit::KernelProgram& program, int axis, int rank, int e,
                                  const std::string& joiner);

// Matmuls: tiled through shared memory (tensor cores or f32), or a thread per output.
std::string render_matmul(const KernelWriter& writer);

// Matmuls with a block-quantized weight: tiles of 64 (or 8) rows by 32 columns, the weight's
// blocks staged in shared memory and multiplied with 8-bit activations by dp4a; and their
// tile count.
std::string render_quantized_matmul(const KernelWriter& writer);
int64_t quantized_matmul_tile_count(const jit::MatmulShape& mm);

// Concat: a thread per group of output elements (16-byte vectors when aligned).
std::string render_concat(const KernelWriter& writer);

// update_slice: a thread per group of elements of the update (16-byte vectors when
// aligned), written at start into x's buffer.
std::string render_update_slice(const KernelWriter& writer);

// index_add: a thread per element of the source, added atomically at its index's position
// into output 0, which already holds x.
std::string render_index_add(const KernelWriter& writer);

// The element loops of concat and update_slice (render_concat.cc).
// Elements per group of the 16-byte path over `spaces` (those whose loads it reads as
// vectors) and every output: 16 / the widest of them; 1 when widest_vector_load rules it out.
int element_group_width(const jit::KernelProgram& program, const std::vector<int>& spaces);
// The run-time test that the loads of `spaces` can be read, and every output written, as
// E-element vectors along dim `last`: every pointer 16-byte aligned, each load's view steps
// by 1 along it, with an offset and other strides that are multiples of E. Joined by `joiner`.
std::string vector_loads_condition(const jit::KernelProgram& program,
                                   const std::vector<int>& spaces, int last, int e,
                                   const std::string& joiner);
// A grid-stride loop over groups of `e` elements along the innermost dim of `space` (rank
// >= 1; e must divide that dim), declaring `idx` (the group's first multi-index) and `g` (the
// group's flat index, in groups). The multi-index is unravelled once per thread and then
// steps by the grid stride's digits with carries: no division per group. `open` starts the
// loop body, `close` steps and ends it (the body must not `continue`).
struct SteppedLoop {
  std::string open, close;
};
SteppedLoop stepped_loop(const KernelWriter& writer, int space, int e, const std::string& idx);
// The epilogue of a group of `e` anchor values `values[0..e)` whose first element is at
// multi-index `index` of space 0 (flat position `flat`): each lane's epilogue, then one
// 16-byte store per output.
std::string vector_epilogue(const KernelWriter& writer, int e, const std::string& values,
                            const std::string& index, const std::string& flat);

// scaled_dot_product_attention: an online softmax over key tiles; tensor cores for f16 and
// bf16 heads up to 128 wide, else a block per query row.
std::string render_attention(const KernelWriter& writer);
// Whether this launch of an attention kernel takes its tensor-core form (a block per 128
// query rows of a batch·head) rather than the portable one (a block per query row).
bool attention_uses_tensor_cores(const jit::KernelProgram& program,
                                 const jit::KernelLaunch& launch);

// A user's custom kernel: the whole module, its own source after the argument struct and
// before a check of its signature; a comment for a CPU-only kernel.
std::string render_custom_kernel(const jit::KernelProgram& program);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_FAMILY_RENDERERS_H_
