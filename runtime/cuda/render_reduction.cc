#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::AnchorKind;
using jit::KernelProgram;
using ops::OpKind;

// Reductions and arg-reductions, in one of two layouts (reduction_is_outer):
//  - inner (the last axis is reduced): a warp per output (8 per block), its lanes striding
//    along the reduced extent (consecutive lanes read consecutive elements), then warp
//    shuffles combine them: short rows waste no threads and no block barrier is needed;
//  - outer (the last axis is kept): a block per 32 consecutive outputs, lane l of each of
//    the 8 warps on output l, warp w on reduced positions w, w+8, ...: every warp load is
//    32 consecutive elements; shared memory combines the 8 warps.
// Both can split the reduced extent over gridDim.y chunks (split.phase 1 writes each
// chunk's partial result to split.scratch, phase 2 combines them in chunk order and runs
// the epilogue), so a few outputs over a long extent still fill the GPU, and the result
// does not depend on scheduling.
std::string render_reduction(const KernelWriter& w) {
  const KernelProgram& p = w.program();
  std::string s;
  const bool arg = p.anchor == AnchorKind::kArgReduce;
  const jit::ReductionAxes dims = jit::reduction_axes(p, w.rank(1));
  const std::vector<int>& reduced = dims.reduced;
  const std::vector<int>& kept = dims.kept;
  const DType operand = p.instrs[p.anchor_operands[0]].dtype;
  const bool floating = is_floating(operand);
  const std::string acc = floating ? "double" : "i64";
  const OpKind op = p.anchor_op;
  const bool sum = op == OpKind::Sum || op == OpKind::Mean;
  std::string identity = "0";
  if (op == OpKind::Max || op == OpKind::Argmax) {
    identity = floating ? "-1.0 / 0.0" : "(i64)(-9223372036854775807LL - 1)";
  } else if (op == OpKind::Min || op == OpKind::Argmin) {
    identity = floating ? "1.0 / 0.0" : "9223372036854775807LL";
  }
  // Folds (y, yi) into (b, bi). Sums add. Otherwise a NaN wins (the first one), then the
  // extreme, and ties keep the lower index, so any combination order gives one answer.
  const std::string better = op == OpKind::Max || op == OpKind::Argmax ? ">" : "<";
  const std::string fold =
      sum ? absl::StrCat("b = ", floating ? "b + y" : "kiln::math::wrapping_add(b, y)", ";")
          : absl::StrCat("if (", floating ? "(y != y && (!(b != b) || yi < bi)) || " : "",
                         "(!(b != b) && (y ", better,
                         " b || (y == b && yi < bi)))) { b = y; bi = yi; }");
  auto fold_into = [&](const std::string& b, const std::string& bi, const std::string& y,
                       const std::string& yi) {
    return absl::StrCat("{ ", acc, "& b = ", b, "; i64& bi = ", bi, "; const ", acc, " y = ", y,
                        "; const i64 yi = ", yi, "; (void)bi; (void)yi; ", fold, " }");
  };
  std::string extent = "(I)1";
  for (int d : reduced) extent = absl::StrCat(extent, " * (I)a.shape[1][", d, "]");
  const std::string value =
      arg ? "best_index" : (op == OpKind::Mean ? "best / (double)extent" : "best");
  // The partial results of chunk c for output o live at scratch[c * outputs + o].
  const std::string partial_values = absl::StrCat("((", acc, "*)split.scratch)");
  const std::string partial_indices = "((i64*)split.scratch + split.chunks * outputs)";
  // Stores a block's result for output o: the partial, or (unsplit) the epilogue.
  const std::string finish_output =
      absl::StrCat("      if (split.phase == 1) {\n        ", partial_values,
                   "[blockIdx.y * outputs + o] = best;\n        ", partial_indices,
                   "[blockIdx.y * outputs + o] = best_index;\n      } else {\n",
                   w.epilogue(value, "o"), "      }\n");
  absl::StrAppend(&s, "  const I outputs = ", w.numel(0), ";\n  const I extent = ", extent, ";\n");
  // Phase 2: a thread per output folds the chunks' partials in order.
  absl::StrAppend(&s, "  if (split.phase == 2) {\n",
                  "    for (I o = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; o < outputs; o += "
                  "(I)gridDim.x * "
                  "(I)blockDim.x) {\n",
                  "      ", acc, " best = ", identity,
                  ";\n      i64 best_index = 9223372036854775807LL;\n",
                  "      for (I c = 0; c < (I)split.chunks; ++c) ",
                  fold_into("best", "best_index", absl::StrCat(partial_values, "[c * outputs + o]"),
                            absl::StrCat(partial_indices, "[c * outputs + o]")),
                  "\n", w.epilogue(value, "o"), "    }\n    return;\n  }\n");
  // This block's chunk of the reduced extent (all of it unless split).
  absl::StrAppend(
      &s, "  const I chunks = split.phase == 1 ? (I)split.chunks : (I)1;\n",
      "  const I chunk_length = (extent + chunks - 1) / chunks;\n",
      "  const I begin = (split.phase == 1 ? (I)blockIdx.y : (I)0) * chunk_length;\n",
      "  const I end = begin + chunk_length < extent ? begin + chunk_length : extent;\n");
  const std::string load_x =
      absl::StrCat("        ", w.unravel_dims(reduced, "r"), "\n", w.space_code(1, "idx1"),
                   "        const ", acc, " x = (", acc, ")v", p.anchor_operands[0], ";\n        ",
                   fold_into("best", "best_index", "x",
                             absl::StrCat("(i64)idx1[", arg ? p.anchor_attrs.axis : 0, "]")),
                   "\n");
  if (reduction_is_outer(p)) {
    absl::StrAppend(
        &s, "  __shared__ ", acc, " shared_value[8][32];\n  __shared__ i64 shared_index[8][32];\n",
        "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n",
        "  for (I tile = blockIdx.x; tile * 32 < outputs; tile += gridDim.x) {\n",
        "    const I o = tile * 32 + lane;\n    ", acc, " best = ", identity,
        ";\n    i64 best_index = 9223372036854775807LL;\n    if (o < outputs) {\n", "      I idx1[",
        w.index_rank(), "] = {0};\n      ", w.unravel_dims(kept, "o"), "\n",
        "      for (I r = begin + warp; r < end; r += 8) {\n", load_x, "      }\n    }\n",
        "    shared_value[warp][lane] = best;\n    shared_index[warp][lane] = best_index;\n",
        "    __syncthreads();\n    if (warp == 0 && o < outputs) {\n",
        "      for (int w = 1; w < 8; ++w) ",
        fold_into("best", "best_index", "shared_value[w][lane]", "shared_index[w][lane]"), "\n",
        finish_output, "    }\n    __syncthreads();\n  }\n");
    return s;
  }
  // Inner: warp w of block b on outputs 8b + w, 8(b + gridDim.x) + w, ...; its lanes stride
  // along the reduced extent, then fold through shuffles (no block barrier).
  absl::StrAppend(
      &s, "  const int lane = threadIdx.x & 31;\n",
      "  for (I o = (I)blockIdx.x * 8 + (threadIdx.x >> 5); o < outputs; o += (I)gridDim.x * 8) "
      "{\n",
      "    I idx1[", w.index_rank(), "] = {0};\n    ", w.unravel_dims(kept, "o"), "\n    ", acc,
      " best = ", identity, ";\n    i64 best_index = 9223372036854775807LL;\n",
      "    for (I r = begin + lane; r < end; r += 32) {\n", load_x, "    }\n",
      "    for (int step = 16; step > 0; step >>= 1) {\n      const ", acc,
      " other = __shfl_down_sync(0xffffffffu, best, step);\n",
      "      const i64 other_index = __shfl_down_sync(0xffffffffu, best_index, step);\n      ",
      fold_into("best", "best_index", "other", "other_index"), "\n    }\n",
      "    if (lane == 0) {\n", finish_output, "    }\n  }\n");
  return s;
}

bool reduction_is_outer(const jit::KernelProgram& p) {
  if (p.anchor != AnchorKind::kReduce && p.anchor != AnchorKind::kArgReduce) return false;
  const int last = p.space_ranks[1] - 1;
  if (last < 0) return false;
  if (p.anchor == AnchorKind::kArgReduce) return p.anchor_attrs.axis != last;
  const auto& axes = p.anchor_attrs.axes;
  return !axes.empty() && std::find(axes.begin(), axes.end(), last) == axes.end();
}

}  // namespace kiln::runtime::cuda
