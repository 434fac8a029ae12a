// scaled_dot_product_attention: the online softmax over key tiles, in one of two forms.
//
// Portable (every dtype, any head size): a block per query row (grid-stride), tiles of
// blockDim.x keys. Each thread scores one key of the tile (q·k through the prologues of
// spaces 1 and 2, times the scale, then the score ops of space 4 with kAnchor as that raw
// score); the block takes the tile's max and sum; then each thread rescales and accumulates
// up to four output channels from the tile's probabilities, held in shared memory. Wider
// rows repeat the sweep per chunk of 4 · blockDim.x channels.
//
// Tensor cores (f16 and bf16 with D and Dv up to 128, chosen at run time): a block per 128
// query rows of one batch·head, 16 rows per warp, tiles of 64 keys. Q's fragments stay in
// registers for the whole sweep; each tile's K and V are staged in shared memory as 16-bit
// values (computed through their prologues). S = Q Kᵀ and O += P V are mma.sync m16n8k16
// with f32 accumulators; P goes from S's accumulators to A fragments without leaving
// registers (FlashAttention-2's layout). The score ops, masks and the causal cut run on the
// accumulators; row max and sum combine the 4 threads that share a row with shuffles.
//
// Either way only a tile of scores ever exists, in registers and shared memory.
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

// Declares the index arrays and sets their leading dims from `flat`, an index over space
// 0's dims before `last` (the query rows, or the batch·heads).
std::string open_indices(const KernelWriter& w, int last, const std::string& flat) {
  const int r = w.rank(0), n = w.index_rank();
  std::string s = absl::StrCat("    I idx0[", n, "] = {0}, idx1[", n, "] = {0}, idx2[", n,
                               "] = {0}, idx3[", n, "] = {0}, idx4[", n,
                               "] = {0};\n    (void)idx4;\n", "    { I rest = ", flat, ";");
  for (int d = last; d >= 0; --d) {
    absl::StrAppend(&s, " idx0[", d, "] = rest % (I)a.shape[0][", d, "]; rest /= (I)a.shape[0][", d,
                    "];");
  }
  absl::StrAppend(&s, " (void)rest; }\n");
  for (int space : {1, 2, 3, 4}) absl::StrAppend(&s, leading_dims(space, r));
  return s;
}

// The sizes both forms read, and the scale.
std::string sizes(const KernelWriter& w, const std::string& R) {
  const jit::KernelProgram& p = w.program();
  const int r = w.rank(0);
  const std::string scale =
      p.anchor_param >= 0 ? absl::StrCat("(", R, ")a.p[", p.anchor_param, "]") : "(" + R + ")1";
  std::string s = absl::StrCat(
      "  const I sq = (I)a.shape[1][", r - 2, "], d = (I)a.shape[1][", r - 1,
      "];\n  const I sk = (I)a.shape[2][", r - 2, "], dv = (I)a.shape[3][", r - 1, "];\n",
      r >= 3 ? absl::StrCat("  const I kv_heads = (I)a.shape[2][", r - 3,
                            "];\n  const I group = kv_heads > 0 ? (I)a.shape[1][", r - 3,
                            "] / kv_heads : (I)1;\n")
             : "",
      "  const ", R, " scale = ", scale, ";\n  I rows = 1;\n");
  for (int d = 0; d + 1 < r; ++d) absl::StrAppend(&s, "  rows *= (I)a.shape[0][", d, "];\n");
  return s;
}

std::string portable_attention(const KernelWriter& w, const std::string& R) {
  const jit::KernelProgram& p = w.program();
  const int r = w.rank(0);
  const std::string inf = absl::StrCat("((", R, ")(1.0 / 0.0))");
  const int q = p.anchor_operands[0], k = p.anchor_operands[1], v = p.anchor_operands[2];
  std::string s = absl::StrCat(
      "  __shared__ ", R, " reduce_shared[32];\n  __shared__ ", R, " probs[", kThreadsPerBlock,
      "];\n", "  for (I row = blockIdx.x; row < rows; row += gridDim.x) {\n",
      open_indices(w, r - 2, "row"), "    const I i = idx0[", r - 2, "];\n");
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
  if (p.anchor_operands.size() > 3) {
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

// The tensor-core form (see the top of the file). Shared memory: one 64 x 136 tile of K and
// one of V (16-bit, padded against bank conflicts), reused to stage Q before the sweep and
// the output after it.
std::string tensor_core_attention(const KernelWriter& w) {
  const jit::KernelProgram& p = w.program();
  const int r = w.rank(0);
  const int q = p.anchor_operands[0], k = p.anchor_operands[1], v = p.anchor_operands[2];
  const bool bf16 = p.instrs[q].dtype == DType::BF16;
  const std::string to16 = bf16 ? "f32_to_bf16" : "f32_to_f16";
  const std::string mma = bf16 ? "mma_bf16_16816" : "mma_f16_16816";
  const std::string inf = "(1.0f / 0.0f)";
  // Stages rows [first, first + 64) of space `space` (q: the queries, k/v: the keys) into
  // `tile` as 16-bit values, zero past the edges.
  auto stage = [&](int space, int operand, const std::string& tile, const std::string& first,
                   const std::string& extent, const std::string& width) {
    return absl::StrCat(
        "      for (int e = threadIdx.x; e < 64 * 128; e += blockDim.x) {\n",
        "        const int row = e >> 7, col = e & 127;\n        float value = 0.0f;\n",
        "        if (", first, " + row < ", extent, " && col < ", width, ") {\n          idx",
        space, "[", r - 2, "] = ", first, " + row;\n          idx", space, "[", r - 1, "] = col;\n",
        w.space_code(space, absl::StrCat("idx", space)), "          value = (float)v", operand,
        ";\n        }\n        ", tile, "[row][col] = ", to16, "(value);\n      }\n");
  };
  std::string s = absl::StrCat(
      "  __shared__ unsigned long long kv_tiles[2 * 64 * 136 / 4];  // 8-byte aligned\n",
      "  unsigned short (*const k_tile)[136] = (unsigned short (*)[136])kv_tiles;\n",
      "  unsigned short (*const v_tile)[136] = k_tile + 64;\n",
      "  float (*const out_tile)[128] = (float (*)[128])kv_tiles;  // after the sweep\n",
      "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n",
      "  const int g = lane >> 2, t4 = lane & 3;  // a row pair and a column pair of fragments\n",
      "  const I d_steps = (d + 15) / 16, dv_tiles = (dv + 7) / 8;\n",
      "  const I q_tiles = (sq + 127) / 128, heads = sq > 0 ? rows / sq : (I)0;\n",
      "  for (I task = blockIdx.x; task < heads * q_tiles; task += gridDim.x) {\n",
      "    const I bh = task / q_tiles, i0 = task % q_tiles * 128;\n", open_indices(w, r - 3, "bh"),
      "    const I wi = i0 + warp * 16;  // this warp's rows\n",
      "    unsigned qf[8][4];\n    for (int half = 0; half < 2; ++half) {  // Q, 64 rows at a "
      "time\n",
      stage(1, q, "k_tile", "i0 + half * 64", "sq", "d"), "      __syncthreads();\n",
      "      if ((warp >> 2) == half) {\n        const int lr = (warp & 3) * 16 + g;\n",
      "        #pragma unroll\n        for (int ks = 0; ks < 8; ++ks) {\n",
      "          const int c = ks * 16 + t4 * 2;\n",
      "          qf[ks][0] = pack2(k_tile[lr][c], k_tile[lr][c + 1]);\n",
      "          qf[ks][1] = pack2(k_tile[lr + 8][c], k_tile[lr + 8][c + 1]);\n",
      "          qf[ks][2] = pack2(k_tile[lr][c + 8], k_tile[lr][c + 9]);\n",
      "          qf[ks][3] = pack2(k_tile[lr + 8][c + 8], k_tile[lr + 8][c + 9]);\n",
      "        }\n      }\n      __syncthreads();\n    }\n",
      "    float o[16][4] = {{0}};\n    float m[2] = {-", inf, ", -", inf, "}, l[2] = {0, 0};\n",
      "    const I key_end = ", p.anchor_attrs.causal ? "(i0 + 128 < sk ? i0 + 128 : sk)" : "sk",
      ";  // keys any row of the block sees\n", "    for (I j0 = 0; j0 < key_end; j0 += 64) {\n",
      stage(2, k, "k_tile", "j0", "sk", "d"), stage(3, v, "v_tile", "j0", "sk", "dv"),
      "      __syncthreads();\n",
      "      float s[8][4] = {{0}};\n      #pragma unroll\n      for (int nt = 0; nt < 8; ++nt) "
      "{\n",
      "        #pragma unroll\n        for (int ks = 0; ks < 8; ++ks) {\n",
      "          if (ks >= d_steps) break;\n",
      "          const int key = nt * 8 + g, c = ks * 16 + t4 * 2;\n",
      "          const unsigned kf[2] = {pack2(k_tile[key][c], k_tile[key][c + 1]),\n",
      "                                  pack2(k_tile[key][c + 8], k_tile[key][c + 9])};\n",
      "          ", mma, "(s[nt], qf[ks], kf);\n        }\n      }\n",
      "      // The scores: scale, score ops, edges and the causal cut; then the online softmax.\n",
      "      float tile_max[2] = {-", inf, ", -", inf, "};\n",
      "      #pragma unroll\n      for (int e = 0; e < 32; ++e) {\n",
      "        const int nt = e >> 2, c = e & 3;\n",
      "        const I i = wi + g + (c >= 2 ? 8 : 0), j = j0 + nt * 8 + t4 * 2 + (c & 1);\n",
      "        float score = s[nt][c] * scale;\n");
  if (p.anchor_operands.size() > 3) {
    absl::StrAppend(
        &s, "        if (i < sq && j < sk) {\n          const float anchor_value = score;\n",
        "          idx4[", r - 2, "] = i;\n          idx4[", r - 1, "] = j;\n",
        w.space_code(4, "idx4"), "          score = (float)v", p.anchor_operands[3],
        ";\n        }\n");
  }
  absl::StrAppend(
      &s, "        if (i >= sq || j >= sk", p.anchor_attrs.causal ? " || j > i" : "", ") score = -",
      inf, ";\n",
      "        s[nt][c] = score;\n        tile_max[c >> 1] = fmaxf(tile_max[c >> 1], score);\n",
      "      }\n      float alpha[2], base[2], tile_sum[2] = {0, 0};\n",
      "      #pragma unroll\n      for (int h = 0; h < 2; ++h) {  // the 4 threads of a row\n",
      "        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));\n",
      "        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));\n",
      "        const float new_max = fmaxf(m[h], tile_max[h]);\n",
      "        // A row all -inf so far subtracts 0: no NaN before its end (0 / 0 there).\n",
      "        base[h] = new_max == -", inf, " ? 0.0f : new_max;\n",
      "        alpha[h] = expf(m[h] - base[h]);\n        m[h] = new_max;\n      }\n",
      "      #pragma unroll\n      for (int e = 0; e < 32; ++e) {\n",
      "        const int nt = e >> 2, c = e & 3;\n",
      "        s[nt][c] = expf(s[nt][c] - base[c >> 1]);\n        tile_sum[c >> 1] += s[nt][c];\n",
      "      }\n      #pragma unroll\n      for (int h = 0; h < 2; ++h) {\n",
      "        tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 1);\n",
      "        tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 2);\n",
      "        l[h] = l[h] * alpha[h] + tile_sum[h];\n      }\n",
      "      #pragma unroll\n      for (int nt = 0; nt < 16; ++nt) {\n",
      "        #pragma unroll\n        for (int c = 0; c < 4; ++c) o[nt][c] *= alpha[c >> 1];\n",
      "      }\n",
      "      // O += P V: S's accumulators of key tiles 2kk and 2kk+1 are P's A fragment.\n",
      "      #pragma unroll\n      for (int kk = 0; kk < 4; ++kk) {\n",
      "        const unsigned pf[4] = {\n", "            pack2(", to16, "(s[2 * kk][0]), ", to16,
      "(s[2 * kk][1])),\n", "            pack2(", to16, "(s[2 * kk][2]), ", to16,
      "(s[2 * kk][3])),\n", "            pack2(", to16, "(s[2 * kk + 1][0]), ", to16,
      "(s[2 * kk + 1][1])),\n", "            pack2(", to16, "(s[2 * kk + 1][2]), ", to16,
      "(s[2 * kk + 1][3]))};\n",
      "        #pragma unroll\n        for (int nt = 0; nt < 16; ++nt) {\n",
      "          if (nt >= dv_tiles) break;\n",
      "          const int ch = nt * 8 + g, key = kk * 16 + t4 * 2;\n",
      "          const unsigned vf[2] = {pack2(v_tile[key][ch], v_tile[key + 1][ch]),\n",
      "                                  pack2(v_tile[key + 8][ch], v_tile[key + 9][ch])};\n",
      "          ", mma, "(o[nt], pf, vf);\n        }\n      }\n      __syncthreads();\n    }\n",
      "    // O / l through shared memory, 64 rows at a time, so the epilogue is written once.\n",
      "    for (int half = 0; half < 2; ++half) {\n      if ((warp >> 2) == half) {\n",
      "        const int lr = (warp & 3) * 16 + g;\n",
      "        #pragma unroll\n        for (int nt = 0; nt < 16; ++nt) {\n",
      "          #pragma unroll\n          for (int c = 0; c < 4; ++c) {\n",
      "            out_tile[lr + (c >= 2 ? 8 : 0)][nt * 8 + t4 * 2 + (c & 1)] = o[nt][c] / l[c >> "
      "1];\n          }\n        }\n      }\n      __syncthreads();\n",
      "      for (int e = threadIdx.x; e < 64 * 128; e += blockDim.x) {\n",
      "        const int row = e >> 7, ch = e & 127;\n        const I i = i0 + half * 64 + row;\n",
      "        if (i >= sq || ch >= dv) continue;\n        idx0[", r - 2, "] = i;\n        idx0[",
      r - 1, "] = ch;\n        const I flat = ", w.flatten(0, "idx0"), ";\n        {\n",
      w.epilogue("out_tile[row][ch]", "flat"),
      "        }\n      }\n      __syncthreads();\n    }\n", "  }\n");
  return s;
}

}  // namespace

bool attention_uses_tensor_cores(const jit::KernelProgram& p, const jit::KernelLaunch& l) {
  if (p.anchor != jit::AnchorKind::kAttention) return false;
  const DType dt = p.instrs[p.anchor_operands[0]].dtype;
  const int r = p.space_ranks[1];
  return (dt == DType::F16 || dt == DType::BF16) && l.spaces[1][r - 1] <= 128 &&
         l.spaces[3][r - 1] <= 128;
}

std::string render_attention(const KernelWriter& w) {
  const jit::KernelProgram& p = w.program();
  const std::string R = p.anchor_dtype == DType::F64 ? "double" : "float";
  const DType dt = p.instrs[p.anchor_operands[0]].dtype;
  std::string s = sizes(w, R);
  if (dt != DType::F16 && dt != DType::BF16) return s + portable_attention(w, R);
  // The same test as attention_uses_tensor_cores, which sizes the grid.
  return absl::StrCat(s, "  if (d <= 128 && dv <= 128) {\n", tensor_core_attention(w),
                      "  } else {\n", portable_attention(w, R), "  }\n");
}

}  // namespace kiln::runtime::cuda
