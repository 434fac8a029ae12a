// The fusion planner: decides which trace nodes are materialized (stored to memory) and
// groups the rest into kernels, one per iteration space.
//
// Rules (docs/fusion.md explains them with examples):
// - Outputs and inputs are materialized.
// - Elementwise ops, views and leaves are recomputed inside every kernel that needs them,
//   unless used by several consumers and costlier than kRecomputeLimit ops to recompute.
// - An anchor (reduction, arg-reduction, row op, matmul, concat, ...) fuses its producers into
//   its operand loads (prologue) and its elementwise consumers of the same shape into its
//   stores (epilogue). Its result is materialized when it is an output, is viewed or
//   broadcast, feeds another anchor, or meets another anchor in one elementwise op.
// - Pointwise stores over the same shape share one kernel when neither depends on the other.
// - Kernels stay bounded: a kernel reads at most kMaxKernelSources buffers and scalars and
//   fuses at most kMaxFusedOps ops; beyond that an intermediate is stored, splitting it.
#ifndef KILN_JIT_FUSION_PLANNER_H_
#define KILN_JIT_FUSION_PLANNER_H_

#include <string>
#include <vector>

#include "jit/fusion/kernel_ir.h"
#include "jit/fusion/trace.h"

namespace kiln::jit {

inline constexpr int kRecomputeLimit = 8;
// Bounds on one kernel, so its CUDA parameter block (pointers, sizes, strides and scalars:
// about 17 KB at the rank limit of 32, below the 32 KB the driver takes) and its source stay
// small.
inline constexpr int kMaxKernelSources = 64;
inline constexpr int kMaxFusedOps = 256;

struct KernelGroup {
  AnchorKind anchor = AnchorKind::kNone;
  int anchor_node = -1;     // the anchor's trace node, when there is one
  std::vector<int> stores;  // trace nodes this kernel materializes
};

// A hand-written attention computed as one attention kernel (jit/fusion/attention_fusion.h):
// its final matmul became an attention node whose fourth operand, the softmax's input, is
// computed inside the kernel from `raw_scores` (the q·kᵀ matmul, never stored) through
// `score_nodes` (the elementwise ops between them).
struct FusedAttention {
  int attention = -1;
  int raw_scores = -1;
  int softmax = -1;  // no longer computed (its kernel's dumps name it)
  std::vector<int> score_nodes;
};

struct FusionPlan {
  std::vector<KernelGroup> groups;   // in execution order
  std::vector<bool> materialized;    // per trace node
  std::vector<std::string> reasons;  // per trace node: why it is materialized
  std::vector<FusedAttention> attention;
};

AnchorKind anchor_kind(ops::OpKind op);

// Plans `trace`. `forced` lists nodes that must be materialized (found by lowering);
// `attention`, the hand-written attentions the trace computes as attention nodes.
FusionPlan plan_fusion(const Trace& trace, const std::vector<int>& forced = {},
                       const std::vector<FusedAttention>& attention = {});

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_PLANNER_H_
