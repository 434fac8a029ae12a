// scaled_dot_product_attention: a block per query row (grid-stride), the online softmax over
// tiles of blockDim.x keys. Each thread scores one key of the tile (q·k through the
// prologues of spaces 1 and 2, times the scale, then the score ops of space 4 with kAnchor as
// that raw score); the block takes the tile's max and sum; then each thread rescales and
// accumulates up to four output channels from the tile's probabilities, held in shared
// memory. Wider rows repeat the sweep per chunk of 4 · blockDim.x channels. Only a tile of
// scores ever exists, in registers and shared memory.
//
// This is the portable form, for every dtype; the tensor-core form (mma for q·kᵀ and P·v in
// 16-bit types) is still to come (docs/attention.md).
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {
namespace {

// Copies the row's leading dims from idx0 into idx<space>, the head dim divided by the
// group for k and v (grouped-query attention).
std::string leading_dims(int space, int r) {
  std::string s;
  for (int d = 0; d + 2 < r; ++d) {
    const bool head = space == 2 || space == 3 ? d == r - 3 : false;
    absl::StrAppend(&s, "    idx", space, "[", d, "] = idx0[", d, "]", head ? " / group" : "",
                    ";\n");
  }
  return s;
}

}  // namespace

std::string render_attention(const KernelWriter& w) {
  const jit::KernelProgram& p = w.program();
  const int r = w.rank(0);
  const std::string R = p.anchor_dtype == DType::F64 ? "double" : "float";
  const std::string inf = absl::StrCat("((", R, ")(1.0 / 0.0))");
  const int q = p.anchor_operands[0], k = p.anchor_operands[1], v = p.anchor_operands[2];
  const bool has_score = p.anchor_operands.size() > 3;
  const std::string scale =
      p.anchor_param >= 0 ? absl::StrCat("(", R, ")a.p[", p.anchor_param, "]") : "(" + R + ")1";
  const int n = w.index_rank();
  std::string s = absl::StrCat(
      "  __shared__ ", R, " reduce_shared[32];\n  __shared__ ", R, " probs[", kThreadsPerBlock,
      "];\n  const I sq = (I)a.shape[1][", r - 2, "], d = (I)a.shape[1][", r - 1,
      "];\n  const I sk = (I)a.shape[2][", r - 2, "], dv = (I)a.shape[3][", r - 1, "];\n",
      r >= 3 ? absl::StrCat("  const I kv_heads = (I)a.shape[2][", r - 3,
                            "];\n  const I group = kv_heads > 0 ? (I)a.shape[1][", r - 3,
                            "] / kv_heads : (I)1;\n")
             : "",
      "  (void)sq;\n  const ", R, " scale = ", scale, ";\n  I rows = 1;\n");
  for (int d = 0; d + 1 < r; ++d) absl::StrAppend(&s, "  rows *= (I)a.shape[0][", d, "];\n");
  absl::StrAppend(&s, "  for (I row = blockIdx.x; row < rows; row += gridDim.x) {\n", "    I idx0[",
                  n, "] = {0}, idx1[", n, "] = {0}, idx2[", n, "] = {0}, idx3[", n,
                  "] = {0}, idx4[", n, "] = {0};\n    { I rest = row;");
  for (int d = r - 2; d >= 0; --d) {
    absl::StrAppend(&s, " idx0[", d, "] = rest % (I)a.shape[0][", d, "]; rest /= (I)a.shape[0][", d,
                    "];");
  }
  absl::StrAppend(&s, " }\n    (void)idx4;\n    const I i = idx0[", r - 2, "];\n");
  for (int space : {1, 2, 3, 4}) absl::StrAppend(&s, leading_dims(space, r));
  absl::StrAppend(
      &s, "    idx1[", r - 2, "] = i;\n    idx4[", r - 2,
      "] = i;\n    const I key_end = ", p.anchor_attrs.causal ? "(i + 1 < sk ? i + 1 : sk)" : "sk",
      ";  // keys this row sees\n",
      "    for (I c0 = 0; c0 < dv; c0 += 4 * (I)blockDim.x) {\n      ", R,
      " acc[4] = {0, 0, 0, 0};\n      ", R, " m = -", inf, ", l = 0;\n",
      "      for (I j0 = 0; j0 < key_end; j0 += (I)blockDim.x) {\n",
      "        const I j = j0 + (I)threadIdx.x;\n        ", R, " score = -", inf, ";\n",
      "        if (j < key_end) {\n          ", R, " dot = 0;\n          idx2[", r - 2,
      "] = j;\n          for (I c = 0; c < d; ++c) {\n            idx1[", r - 1, "] = c;\n",
      "            idx2[", r - 1, "] = c;\n", w.space_code(1, "idx1"), w.space_code(2, "idx2"),
      "            dot += (", R, ")v", q, " * (", R, ")v", k, ";\n          }\n          const ", R,
      " anchor_value = dot * scale;\n          score = anchor_value;\n");
  if (has_score) {
    absl::StrAppend(&s, "          idx4[", r - 1, "] = j;\n", w.space_code(4, "idx4"),
                    "          score = (", R, ")v", p.anchor_operands[3], ";\n");
  }
  absl::StrAppend(
      &s, "        }\n", "        const ", R, " tile_max = block_reduce<", R, ">(score, [](", R,
      " x, ", R, " y) { return x > y ? x : y; }, -", inf, ", reduce_shared);\n        const ", R,
      " new_max = m > tile_max ? m : tile_max;\n",
      "        // A row all -inf so far subtracts 0: no NaN before its end (0 / 0 there).\n",
      "        const ", R, " base = new_max == -", inf, " ? (", R, ")0 : new_max;\n        const ",
      R, " alpha = exp(m - base);\n        const ", R,
      " prob = j < key_end ? exp(score - base) : (", R,
      ")0;\n        l = l * alpha + block_reduce<", R, ">(prob, [](", R, " x, ", R,
      " y) { return x + y; }, (", R, ")0, reduce_shared);\n",
      "        probs[threadIdx.x] = prob;\n        __syncthreads();\n",
      "        const I count = key_end - j0 < (I)blockDim.x ? key_end - j0 : (I)blockDim.x;\n",
      "        for (int t = 0; t < 4; ++t) {\n          const I c = c0 + t * (I)blockDim.x + "
      "(I)threadIdx.x;\n          acc[t] *= alpha;\n          if (c >= dv) continue;\n",
      "          idx3[", r - 1, "] = c;\n          for (I jj = 0; jj < count; ++jj) {\n",
      "            idx3[", r - 2, "] = j0 + jj;\n", w.space_code(3, "idx3"),
      "            acc[t] += probs[jj] * (", R, ")v", v, ";\n          }\n        }\n",
      "        m = new_max;\n        __syncthreads();\n      }\n",
      "      for (int t = 0; t < 4; ++t) {\n        const I c = c0 + t * (I)blockDim.x + "
      "(I)threadIdx.x;\n        if (c >= dv) continue;\n        idx0[",
      r - 1, "] = c;\n        const I flat = ", w.flatten(0, "idx0"), ";\n        {\n",
      w.epilogue("acc[t] / l", "flat"), "        }\n      }\n    }\n  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
