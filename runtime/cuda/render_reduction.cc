#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::AnchorKind;
using jit::KernelProgram;
using ops::OpKind;

namespace {

// Elements per lane of an inner reduction's 16-byte loads: 16 / the widest element loaded,
// when only the last axis is reduced (a lane's E elements are then consecutive in one row)
// and widest_vector_load allows a vector path. 0 for none.
int inner_vector_width(const KernelProgram& program, const std::vector<int>& reduced, int rank) {
  if (reduced.size() != 1 || reduced[0] != rank - 1) return 0;
  const int widest = widest_vector_load(program, 1);
  return widest > 0 ? 16 / widest : 0;
}

// Steps the reduced dims of idx1 (`dims`, innermost last) forward by `step` positions of
// their flat order, carrying into outer dims only when the innermost one passes its extent:
// a division per row crossed, not per element. The outermost dim is not wrapped (the loop
// ends first).
std::string advance(const std::vector<int>& dims, const std::string& step) {
  if (dims.empty()) return "";
  std::string s = absl::StrCat("idx1[", dims.back(), "] += ", step, ";");
  std::string close;
  for (size_t i = dims.size() - 1; i > 0; --i) {
    const int d = dims[i];
    const std::string n = absl::StrCat("(I)a.shape[1][", d, "]");
    absl::StrAppend(&s, " if (idx1[", d, "] >= ", n, ") { const I carry = idx1[", d, "] / ", n,
                    "; idx1[", d, "] -= carry * ", n, "; idx1[", dims[i - 1], "] += carry;");
    close += " }";
  }
  return s + close;
}

}  // namespace

// Reductions and arg-reductions, in one of two layouts (reduction_is_outer):
//  - inner (the last axis is reduced): a team of warps per output, 8 outputs per block (a
//    warp each) or, when there are fewer outputs, fewer outputs taken by teams of 2, 4 or 8
//    warps (a sum to a scalar uses the whole block). The team's lanes stride along the
//    reduced extent (consecutive lanes read consecutive elements, 16 bytes each when the
//    rows are contiguous and aligned), then warp shuffles and, across a team's warps, shared
//    memory combine them;
//  - outer (the last axis is kept): a block per 32 consecutive outputs, lane l of each of
//    the 8 warps on output l, warp w on reduced positions w, w+8, ...: every warp load is
//    32 consecutive elements; shared memory combines the 8 warps. With fewer than 32
//    outputs a block's tile is the power of two W that holds them and each warp takes
//    32 / W reduced positions at a time (lane l: output l % W), so every lane works; shuffles
//    fold each warp's positions before shared memory combines the warps;
// Both can split the reduced extent over gridDim.y chunks (split.phase 1 writes each
// chunk's partial result to split.scratch, phase 2 combines them in chunk order and runs
// the epilogue), so a few outputs over a long extent still fill the GPU, and the result
// does not depend on scheduling.
// f32, f16 and bf16 operands accumulate in f32 (FP64 runs at a fraction of f32's rate on
// most GPUs): each lane's sum is compensated (Kahan), and lanes combine in a tree, so the
// error stays near a double sum's. f64 operands accumulate in f64, integers in i64. The
// reduced multi-index is stepped, never unraveled per element.
std::string render_reduction(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  std::string s;
  const bool arg = program.anchor == AnchorKind::kArgReduce;
  const jit::ReductionAxes dims = jit::reduction_axes(program, writer.rank(1));
  const std::vector<int>& reduced = dims.reduced;
  const std::vector<int>& kept = dims.kept;
  const DType operand = program.instrs[program.anchor_operands[0]].dtype;
  const bool floating = is_floating(operand);
  const std::string acc = floating ? register_type(operand) : "i64";
  const bool single = acc == "float";
  const OpKind op = program.anchor_op;
  const bool sum = op == OpKind::Sum || op == OpKind::Mean;
  const bool compensated = sum && single;
  const std::string inf = single ? "(1.0f / 0.0f)" : "(1.0 / 0.0)";
  std::string identity = "0";
  if (op == OpKind::Max || op == OpKind::Argmax) {
    identity = floating ? absl::StrCat("-", inf) : "(i64)(-9223372036854775807LL - 1)";
  } else if (op == OpKind::Min || op == OpKind::Argmin) {
    identity = floating ? inf : "9223372036854775807LL";
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
  // A lane's fold of one element x at index xi. A compensated sum keeps the rounding error
  // of each addition in `compensation` (reset when it is not finite, so an infinite or NaN
  // element gives what a plain sum gives); it is taken off once, before lanes combine.
  auto fold_element = [&](const std::string& x, const std::string& xi) {
    if (!compensated) return fold_into("best", "best_index", x, xi);
    return absl::StrCat("{ const float y = ", x,
                        " - compensation; const float t = best + y; compensation = (t - best) "
                        "- y; if (compensation - compensation != 0.0f) compensation = 0.0f; "
                        "best = t; }");
  };
  const std::string settle = compensated ? "    best -= compensation;\n" : "";
  const std::string declare_best =
      absl::StrCat(acc, " best = ", identity, ";\n    i64 best_index = 9223372036854775807LL;\n",
                   compensated ? "    float compensation = 0.0f;\n" : "");
  std::string extent = "(I)1";
  for (int d : reduced) extent = absl::StrCat(extent, " * (I)a.shape[1][", d, "]");
  const std::string value =
      arg ? "best_index" : (op == OpKind::Mean ? absl::StrCat("best / (", acc, ")extent") : "best");
  // The partial results of chunk c for output o live at scratch[c * outputs + o].
  const std::string partial_values = absl::StrCat("((", acc, "*)split.scratch)");
  const std::string partial_indices = "((i64*)split.scratch + split.chunks * outputs)";
  // Stores a block's result for output o: the partial, or (unsplit) the epilogue.
  const std::string finish_output =
      absl::StrCat("      if (split.phase == 1) {\n        ", partial_values,
                   "[blockIdx.y * outputs + o] = best;\n        ", partial_indices,
                   "[blockIdx.y * outputs + o] = best_index;\n      } else {\n",
                   writer.epilogue(value, "o"), "      }\n");
  absl::StrAppend(&s, "  const I outputs = ", writer.numel(0), ";\n  const I extent = ", extent,
                  ";\n");
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
                  "\n", writer.epilogue(value, "o"), "    }\n    return;\n  }\n");
  // This block's chunk of the reduced extent (all of it unless split). Chunks start at
  // multiples of 16, so a chunk of a contiguous row starts 16-byte aligned when the row does.
  absl::StrAppend(
      &s, "  const I chunks = split.phase == 1 ? (I)split.chunks : (I)1;\n",
      "  const I chunk_length = ((extent + chunks - 1) / chunks + 15) & ~(I)15;\n",
      "  const I begin = (split.phase == 1 ? (I)blockIdx.y : (I)0) * chunk_length;\n",
      "  const I end = begin + chunk_length < extent ? begin + chunk_length : extent;\n");
  const std::string index_of_x = absl::StrCat(
      "(i64)idx1[", arg ? program.anchor_attrs.axis : (reduced.empty() ? 0 : reduced.back()), "]");
  // A lane's walk over reduced positions r = first, first + step, ... < stop: the reduced
  // multi-index is unraveled once (a division per reduced dim), then stepped.
  auto walk = [&](const std::string& first, const std::string& stop, const std::string& step,
                  const std::string& indent) {
    // Unraveled only when the lane has work: a reduced dim may be empty (extent 0).
    return absl::StrCat(indent, "if (", first, " < ", stop, ") {\n", indent, "  ",
                        writer.unravel_dims(reduced, first), "\n", indent, "  for (I r = ", first,
                        "; r < ", stop, "; r += ", step, ") {\n", writer.space_code(1, "idx1"),
                        indent, "    const ", acc, " x = (", acc, ")v", program.anchor_operands[0],
                        ";\n", indent, "    ", fold_element("x", arg ? index_of_x : "0"), "\n",
                        indent, "    ", advance(reduced, step), "\n", indent, "  }\n", indent,
                        "}\n");
  };
  if (reduction_is_outer(program)) {
    // A tile of `width` consecutive outputs per block: 32, or with fewer outputs the
    // smallest power of two that holds them, so that no lane idles. Lane l takes output
    // l % width and row slot warp * slices + l / width of the 8 * slices slots that stride
    // along the reduced extent; shuffles then fold a warp's slices of each output (in a
    // fixed tree: the result does not depend on timing) and shared memory the 8 warps.
    absl::StrAppend(
        &s, "  __shared__ ", acc, " shared_value[8][32];\n  __shared__ i64 shared_index[8][32];\n",
        "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n",
        "  const int width = outputs >= 32 ? 32 : outputs > 8 ? (outputs > 16 ? 32 : 16)\n",
        "                  : outputs > 4 ? 8 : outputs > 2 ? 4 : outputs > 1 ? 2 : 1;\n",
        "  const int slices = 32 / width, column = lane & (width - 1);\n",
        "  const I slot = (I)warp * slices + lane / width, slots = (I)8 * slices;\n",
        "  for (I tile = blockIdx.x; tile * width < outputs; tile += gridDim.x) {\n",
        "    const I o = tile * width + column;\n    ", declare_best, "    if (o < outputs) {\n",
        "      I idx1[", writer.index_rank(), "] = {0};\n      ", writer.unravel_dims(kept, "o"),
        "\n", "      if (width == 32) {  // the common case, its stride a constant\n",
        walk("begin + warp", "end", "8", "        "), "      } else {\n",
        walk("begin + slot", "end", "slots", "        "), "      }\n    }\n", settle,
        "    for (int step = 16; step >= width; step >>= 1) {  // the warp's slices\n",
        "      const ", acc, " other = __shfl_down_sync(0xffffffffu, best, step);\n",
        "      const i64 other_index = __shfl_down_sync(0xffffffffu, best_index, step);\n      ",
        fold_into("best", "best_index", "other", "other_index"), "\n    }\n",
        "    shared_value[warp][lane] = best;\n    shared_index[warp][lane] = best_index;\n",
        "    __syncthreads();\n    if (warp == 0 && lane < width && o < outputs) {\n",
        "      for (int w = 1; w < 8; ++w) ",
        fold_into("best", "best_index", "shared_value[w][lane]", "shared_index[w][lane]"), "\n",
        finish_output, "    }\n    __syncthreads();\n  }\n");
    return s;
  }
  // Inner: team t of block b on outputs per_block * b + t, per_block * (b + gridDim.x) + t,
  // ...; its lanes stride along the reduced extent, then fold through shuffles and, for a
  // team of several warps, shared memory (in warp order: the same result every run).
  absl::StrAppend(
      &s, "  __shared__ ", acc, " team_value[8];\n  __shared__ i64 team_index[8];\n",
      "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n",
      "  const int per_block = outputs >= 8 ? 8 : outputs >= 4 ? 4 : outputs >= 2 ? 2 : 1;\n",
      "  const int team_warps = 8 / per_block, team = warp / team_warps;\n",
      "  const I team_threads = (I)team_warps * 32, team_lane = (I)threadIdx.x % team_threads;\n",
      "  for (I base = (I)blockIdx.x * per_block; base < outputs; base += (I)gridDim.x * "
      "per_block) {\n",
      "    const I o = base + team;\n    ", declare_best, "    if (o < outputs) {\n",
      "      I idx1[", writer.index_rank(), "] = {0};\n      ", writer.unravel_dims(kept, "o"),
      "\n");
  const int e = inner_vector_width(program, reduced, writer.rank(1));
  std::string scalar_first = "begin + team_lane";
  if (e > 1) {
    // Every load's rows contiguous along the reduced axis and 16-byte aligned.
    const int last = writer.rank(1) - 1;
    absl::StrAppend(&s, "      const bool vectorizable = ",
                    vector_rows_condition(program, last, writer.rank(1), e, " &&\n          "),
                    ";\n      const I vector_end = vectorizable ? begin + (end - begin) / ", e,
                    " * ", e, " : begin;\n", "      for (I r = begin + team_lane * ", e,
                    "; r < vector_end; r += team_threads * ", e, ") {\n        idx1[", last,
                    "] = r;\n");
    absl::StrAppend(&s, writer.vector_loads(1, e, "idx1", "        "));
    absl::StrAppend(&s, "        #pragma unroll\n        for (int e = 0; e < ", e, "; ++e) {\n",
                    writer.space_code(1, "", "e"), "          const ", acc, " x = (", acc, ")v",
                    program.anchor_operands[0], ";\n          ",
                    fold_element("x", arg ? "(i64)(r + e)" : "0"), "\n        }\n      }\n");
    scalar_first = "vector_end + team_lane";
  }
  absl::StrAppend(
      &s, walk(scalar_first, "end", "team_threads", "      "), "    }\n", settle,
      "    for (int step = 16; step > 0; step >>= 1) {\n      const ", acc,
      " other = __shfl_down_sync(0xffffffffu, best, step);\n",
      "      const i64 other_index = __shfl_down_sync(0xffffffffu, best_index, step);\n      ",
      fold_into("best", "best_index", "other", "other_index"), "\n    }\n",
      "    if (team_warps > 1) {  // the same for the whole block\n",
      "      if (lane == 0) {\n        team_value[warp] = best;\n        team_index[warp] = "
      "best_index;\n      }\n      __syncthreads();\n",
      "      if (lane == 0 && warp % team_warps == 0) {\n",
      "        for (int w = warp + 1; w < warp + team_warps; ++w) ",
      fold_into("best", "best_index", "team_value[w]", "team_index[w]"),
      "\n      }\n      __syncthreads();\n    }\n",
      "    if (lane == 0 && warp % team_warps == 0 && o < outputs) {\n", finish_output,
      "    }\n  }\n");
  return s;
}

bool reduction_is_outer(const jit::KernelProgram& program) {
  if (program.anchor != AnchorKind::kReduce && program.anchor != AnchorKind::kArgReduce) {
    return false;
  }
  const int last = program.space_ranks[1] - 1;
  if (last < 0) return false;
  if (program.anchor == AnchorKind::kArgReduce) return program.anchor_attrs.axis != last;
  const auto& axes = program.anchor_attrs.axes;
  return !axes.empty() && std::find(axes.begin(), axes.end(), last) == axes.end();
}

}  // namespace kiln::runtime::cuda
