// Finds attention written by hand, softmax(f(q @ kᵀ)) @ v with f any elementwise ops over the
// scores (a scale, a mask added or chosen with where, a soft cap), and turns it into one
// attention node for planning: the final matmul becomes scaled_dot_product_attention with a
// fourth operand, the softmax's input, that the attention kernel computes per score from
// q·kᵀ (jit/fusion/kernel_ir.h, kAttention). The scores are then never stored.
//
// It fuses only when nothing else reads the scores, the softmax or what lies between: a
// probability that is also an output, for one, must be stored, and then the composed ops
// run. Every candidate gets a note, fused or why not, which the plan dump prints.
#ifndef KILN_JIT_FUSION_ATTENTION_FUSION_H_
#define KILN_JIT_FUSION_ATTENTION_FUSION_H_

#include <memory>
#include <string>
#include <vector>

#include "jit/fusion/planner.h"
#include "jit/fusion/trace.h"
#include "ops/attrs.h"

namespace kiln::jit {

struct AttentionRewrite {
  Trace trace;  // the rewritten trace; only set when `fused` is not empty
  std::vector<FusedAttention> fused;
  std::vector<std::string> notes;           // per candidate: fused, or why not
  std::shared_ptr<const ops::Attrs> attrs;  // the new attention nodes' (scale 1, not causal)
};

AttentionRewrite fuse_hand_written_attention(const Trace& trace);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_ATTENTION_FUSION_H_
