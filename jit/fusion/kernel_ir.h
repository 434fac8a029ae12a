// Kernel IR: what one fused kernel computes, in a form both devices consume.
//
// A kernel iterates over spaces. Space 0 is the output iteration space (the shape of what it
// stores). A kernel may have an anchor, the one non-elementwise op it is built around
// (AnchorKind: reduction, arg-reduction, row norm, scan, top-k, matmul, concat, update_slice,
// attention, a user's whole kernel, a collective); the anchor's operand k is computed over
// space k+1 (the prologue), and the anchor's result is read in space 0 (the epilogue).
// A pointwise kernel has no anchor and only space 0.
//
// Values are SSA instructions over one space each: loads through strided index maps, leaves
// computed from the index (arange, rand, randn), scalar parameters, elementwise ops, casts,
// and gathers (a load whose position along one axis is another instruction's value). Stores write
// space-0 values to the kernel's outputs.
//
// The program (KernelProgram) never depends on sizes: shapes, strides, offsets and scalars
// are launch parameters (KernelLaunch). So a new batch size reuses every program.
#ifndef KILN_JIT_FUSION_KERNEL_IR_H_
#define KILN_JIT_FUSION_KERNEL_IR_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "jit/fusion/family_geometry.h"
#include "kiln/dtype.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/value_type.h"

namespace kiln::jit {

enum class InstrKind {
  kLoad,       // input[input] at the offset given by view[view]
  kParam,      // a scalar parameter (constants), broadcast
  kIndexLeaf,  // arange / rand / randn of the flat index given by view[view]
  kUnary,      // op(operands[0])
  kBinary,     // op(operands[0], operands[1]); comparisons give Bool
  kWhere,      // operands[0] ? operands[1] : operands[2]
  kCast,       // operands[0] converted to dtype
  kAnchor,     // the anchor's result at this space-0 position (epilogue only)
  kCustom,     // a registered custom function of its operands (F32 in and out)
  kGather,     // input[input] at view[view]'s offset plus a position along the gathered
               // axis: operands[0] (an I64 index, checked against the axis's extent); op is
               // take or take_along_axis
};

struct Instr {
  InstrKind kind = InstrKind::kLoad;
  ops::OpKind op = ops::OpKind::Input;
  DType dtype = DType::F32;  // the value's dtype
  int space = 0;
  // Operand instructions, in the same space; -1 past the op's arity. kUnary and kCast use
  // one, kBinary two, kWhere three (condition, then, else), kCustom up to three.
  std::array<int, 3> operands = {-1, -1, -1};
  int input = -1;     // kLoad: the kernel's input slot
  int view = -1;      // kLoad, kIndexLeaf: the launch's view slot
  int param = -1;     // kParam, rand/randn seed: the kernel's parameter slot
  int function = -1;  // kCustom: the registered function's id
};

// kCustomKernel is a user's whole kernel: nothing fuses into it, it has no instructions, and
// anchor_attrs.function names it (ops/custom_functions.h).
// kUpdateSlice writes its operand (the update, space 1) into output 0 at anchor_param's
// position along anchor_attrs.axis (and, for a region, at anchor_attrs.offsets[d] along each
// other dim d); output 0 starts as input 0 (x) and the rest of it is not written (the
// backend aliases or copies x's buffer first).
// kIndexAdd adds its operand (the source, space 1) into output 0, slice l along
// anchor_attrs.axis at the position input anchor_index_input's element l names; output 0
// starts as input 0 (x), copied by the backend (ops/index_add.h).
// kAttention computes softmax(score) v per query row with an online softmax over key tiles:
// operands q, k, v (spaces 1-3); the raw score q·k times anchor_param's scale (1 without
// one); then, when there is a fourth operand, the score is that space-4 instruction, which
// reads the raw score through kAnchor (a mask added, or the hand-written form's own
// elementwise ops); anchor_attrs.causal cuts keys after the query's position, which is its
// row i, or Sk - Sq + i with anchor_attrs.bottom_right (ops::causal_offset).
// kRowNorm, kScan and kTopk are the row ops (ops::OpClass::kRowNorm): each result reads its
// operand's whole row along anchor_attrs.axis (jit::row_norm_shape). Each has a kind of its
// own because every device runs them as different kernels, so a switch on the kind (built
// with -Werror=switch) must name each one rather than test anchor_op.
// A cumsum (kScan) scans its row from the end with anchor_attrs.reverse and leaves each
// element out of its own sum with anchor_attrs.exclusive.
// A topk_indices (kTopk) gives the positions of its row's first k elements in topk's order
// (the largest first, or the smallest with anchor_attrs.largest false); k is space 0's
// extent along the axis. Its operand is compared in its own dtype (lowering casts none).
enum class AnchorKind {
  kNone,
  kReduce,
  kArgReduce,
  kRowNorm,  // softmax, log_softmax, layer_norm, rms_norm
  kScan,     // cumsum
  kTopk,     // topk_indices
  kMatmul,
  kConcat,
  kCustomKernel,
  kUpdateSlice,
  kIndexAdd,
  kAttention,
  kCollective  // all_reduce ...: whole buffers exchanged with other processes, nothing fused
};

struct Store {
  int value;   // a space-0 instruction
  int output;  // the kernel's output slot
};

struct KernelProgram {
  std::string name;  // says what it computes, e.g. "reduce_sum_exp_mul"
  AnchorKind anchor = AnchorKind::kNone;
  ops::OpKind anchor_op = ops::OpKind::Input;
  ops::Attrs anchor_attrs;           // axes/keepdims/axis (never sizes)
  DType anchor_dtype = DType::F32;   // the anchor's result dtype
  std::vector<int> anchor_operands;  // operand k: an instruction in space k+1
  int anchor_param = -1;  // eps (layer_norm rms_norm), start (update_slice), scale (attention)
  // update_slice with a start tensor: the input slot holding that one I32/I64 value, which
  // the kernel reads when it runs (anchor_param is then unused).
  int anchor_start_input = -1;
  // index_add: the input slot holding its indices (one dim of I32/I64).
  int anchor_index_input = -1;
  std::vector<int> space_ranks;            // rank of each space
  std::vector<DType> input_dtypes;         // per input slot
  std::vector<DType> output_dtypes;        // per output slot
  std::vector<ViewPattern> view_patterns;  // per view: its broadcast/contiguity pattern
  int num_params = 0;
  std::vector<Instr> instrs;  // operands before users
  std::vector<Store> stores;

  // The printed program: readable, and the kernel cache key (it holds no sizes).
  std::string to_string() const;
};

// A strided index map from a space to a buffer's (or leaf's) flat element index.
struct ViewParams {
  std::vector<int64_t> strides;  // per dim of the view's space
  int64_t offset = 0;
  // A kGather's view (ViewAccess::kGathered) also moves along the gathered axis: position p
  // (0 <= p < gather_extent) reads offset + ... + p * gather_stride.
  int64_t gather_stride = 0;
  int64_t gather_extent = 0;
};

struct KernelLaunch {
  std::vector<ops::Shape> spaces;  // per space, its shape
  std::vector<ViewParams> views;
  std::vector<int> inputs;   // per input slot, the plan buffer it reads
  std::vector<int> outputs;  // per output slot, the plan buffer it writes
  std::vector<int> params;   // per parameter slot, the trace parameter
  std::vector<int> nodes;    // the trace nodes this kernel computes (for dumps and logs)
};

const char* anchor_name(AnchorKind anchor);

// Whether the program's output 0 starts as its input 0 (update_slice, index_add): the
// backend hands the kernel x's own buffer (output_start) or a copy of it, and the kernel
// writes only what changes.
inline bool output_starts_as_input(const KernelProgram& program) {
  return program.anchor == AnchorKind::kUpdateSlice || program.anchor == AnchorKind::kIndexAdd;
}

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_KERNEL_IR_H_
