// The part of rendering Kernel IR as CUDA C++ that every kernel family shares: how a dtype
// is held in registers and in memory, how each op is spelled, and, for one program, the index
// math over the Params struct and the code of each iteration space's instructions. The
// family renderers (render_*.cc) lay out the threads and loops around it.
#ifndef KILN_RUNTIME_CUDA_KERNEL_WRITER_H_
#define KILN_RUNTIME_CUDA_KERNEL_WRITER_H_

#include <string>
#include <vector>

#include "jit/fusion/kernel_ir.h"
#include "runtime/cuda/kernel_args.h"

namespace kiln::runtime::cuda {

// The C type of the register class `dt` computes in (jit::register_class, as on the CPU:
// f16/bf16/f32 in float, f64 in double, integers and bool in 64-bit integers).
std::string register_type(DType dt);

// The C type an element of dtype `dt` is stored as in memory.
std::string storage_type(DType dt);

// `v` (a register of dtype `from`) converted to dtype `to`, under the cast rules.
std::string cast(DType from, DType to, const std::string& v);

// Assigns register value `v` (of dtype `dt`) to a stored element.
std::string to_storage(DType dt, const std::string& element, const std::string& v);

// Writes the code of one kernel program. Every index array it declares or reads (idx0,
// idx1, ..., out) has the Params struct's rank, so the two always agree; space s's shape is
// a.shape[s], view v's strides and offset a.stride[v] and a.offset[v], all read as the
// index type I.
class KernelWriter {
 public:
  explicit KernelWriter(const jit::KernelProgram& program);

  const jit::KernelProgram& program() const { return program_; }
  const ParamsLayout& layout() const { return layout_; }
  // The length of every index array (the Params struct's rank).
  int index_rank() const { return rank_; }
  // The rank of iteration space `space`.
  int rank(int space) const { return program_.space_ranks[space]; }

  // Declares `idx` as the multi-index of flat position `flat` in `space`.
  std::string unravel(int space, const std::string& idx, const std::string& flat) const;
  // Declares nothing: sets idx1[d] for `dims` (innermost last) from the flat index `flat`.
  std::string unravel_dims(const std::vector<int>& dims, const std::string& flat) const;
  // The number of elements of `space`.
  std::string numel(int space) const;
  // Flat row-major index of multi-index `idx` in `space`.
  std::string flatten(int space, const std::string& idx) const;
  // The element offset of multi-index `idx` (of `space`) in view `view`.
  std::string offset(int view, int space, const std::string& idx) const;

  // Declares v<k> for every instruction of `space`, indexed by `idx`.
  // With `lane` set (the vectorized pointwise path), load k reads element `lane` of the
  // thread's registers ld<k> instead of memory.
  std::string space_code(int space, const std::string& idx, const std::string& lane = "") const;
  // Declares `const Pack<T, e> ld<k>` for every load k of `space`: the e elements of its
  // input from view offset of multi-index `idx` on, as one 16-byte load, for space_code's
  // `lane` form. Each line starts with `indent` (the caller's nesting).
  std::string vector_loads(int space, int e, const std::string& idx,
                           const std::string& indent) const;
  // Stores every output's value at flat position `flat` of space 0.
  std::string stores(const std::string& flat) const;
  // What vector_stores' `at` counts: elements of the output (the pack goes to
  // *(Pack<T, e>*)((T*)a.out[o] + at)) or whole packs (((Pack<T, e>*)a.out[o])[at]).
  enum class PackOffset { kElements, kVectors };
  // Writes e consecutive elements of every output as one 16-byte store each. It declares a
  // Pack out<o> per output, then in a loop over lanes e = 0..e-1 runs `lane_code` (which
  // must declare the v<k> the stores read, as space_code does) and puts each store's value
  // in out<o>.v[e]; after the loop each pack goes to memory at `at`. The packs, the loop and
  // the pack stores start with `indent`; the lane's stores, like space_code's lines, with 6
  // spaces.
  std::string vector_stores(int e, const std::string& lane_code, const std::string& at,
                            PackOffset unit, const std::string& indent) const;
  // The epilogue for one element of space 0 whose anchor value is `value`. `index`, when
  // given, names a multi-index array of the caller's that already holds that element's
  // position (a row norm's idx1: space 1 has space 0's shape), so no per-element division
  // unravels `flat`.
  std::string epilogue(const std::string& value, const std::string& flat,
                       const std::string& index = "") const;

 private:
  const jit::KernelProgram& program_;
  const ParamsLayout layout_;
  const int rank_;
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_KERNEL_WRITER_H_
