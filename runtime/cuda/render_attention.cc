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
// query rows of one batch·head, 16 rows per warp, tiles of 64 keys. Q's fragments (staged
// once through shared memory, loaded by ldmatrix) stay in registers for the whole sweep.
// Each tile's K and V are staged in shared memory as 16-bit values: by 16-byte cp.async when
// the operand is a plain 16-bit load whose head dim is contiguous and aligned (checked at
// run time, as the matmul core does), else element by element through their prologues, into
// the same layout. V of tile j is copied while S = Q Kᵀ of tile j runs, K of tile j + 1 while
// O += P V of tile j runs. S = Q Kᵀ and O += P V are mma.sync m16n8k16 with f32
// accumulators, K's fragments by ldmatrix.x4 and V's by ldmatrix.x4.trans; P goes from S's
// accumulators to A fragments without leaving registers (FlashAttention-2's layout). The score ops,
// masks and the causal cut (top-left, or bottom-right: shifted by sk - sq) run on the
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
std::string open_indices(const KernelWriter& writer, int last, const std::string& flat) {
  const int r = writer.rank(0), n = writer.index_rank();
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

// The end of the keys that query rows before `end_row` see: every key, or under a causal cut
// keys j < end_row + causal_offset, clamped to [0, sk] (a bottom-right block whose rows all
// come before key 0 sees none).
std::string key_end(const jit::KernelProgram& program, const std::string& end_row) {
  if (!program.anchor_attrs.causal) return "sk";
  const std::string end = absl::StrCat("(", end_row, " + causal_offset)");
  return absl::StrCat("(", end, " < 0 ? (I)0 : ", end, " < sk ? ", end, " : sk)");
}

// The sizes both forms read, the scale, and the causal cut's offset: query i sees keys
// j <= i + causal_offset (ops::causal_offset: 0, or sk - sq when bottom-right aligned).
std::string sizes(const KernelWriter& writer, const std::string& R) {
  const jit::KernelProgram& program = writer.program();
  const int r = writer.rank(0);
  const std::string scale = program.anchor_param >= 0
                                ? absl::StrCat("(", R, ")a.p[", program.anchor_param, "]")
                                : "(" + R + ")1";
  std::string s = absl::StrCat(
      "  const I sq = (I)a.shape[1][", r - 2, "], d = (I)a.shape[1][", r - 1,
      "];\n  const I sk = (I)a.shape[2][", r - 2, "], dv = (I)a.shape[3][", r - 1, "];\n",
      r >= 3 ? absl::StrCat("  const I kv_heads = (I)a.shape[2][", r - 3,
                            "];\n  const I group = kv_heads > 0 ? (I)a.shape[1][", r - 3,
                            "] / kv_heads : (I)1;\n")
             : "",
      "  const ", R, " scale = ", scale,
      ";\n  const I causal_offset = ", program.anchor_attrs.bottom_right ? "sk - sq" : "(I)0",
      ";\n  (void)causal_offset;\n", "  I rows = 1;\n");
  for (int d = 0; d + 1 < r; ++d) absl::StrAppend(&s, "  rows *= (I)a.shape[0][", d, "];\n");
  return s;
}

std::string portable_attention(const KernelWriter& writer, const std::string& R) {
  const jit::KernelProgram& program = writer.program();
  const int r = writer.rank(0);
  const std::string inf = absl::StrCat("((", R, ")(1.0 / 0.0))");
  const int q = program.anchor_operands[0], k = program.anchor_operands[1],
            v = program.anchor_operands[2];
  std::string s = absl::StrCat(
      "  __shared__ ", R, " reduce_shared[32];\n  __shared__ ", R, " probs[", kThreadsPerBlock,
      "];\n", "  for (I row = blockIdx.x; row < rows; row += gridDim.x) {\n",
      open_indices(writer, r - 2, "row"), "    const I i = idx0[", r - 2, "];\n");
  absl::StrAppend(&s, "    idx1[", r - 2, "] = i;\n    idx4[", r - 2,
                  "] = i;\n    const I key_end = ", key_end(program, "i + 1"),
                  ";  // keys this row sees\n",
                  "    for (I c0 = 0; c0 < dv; c0 += 4 * (I)blockDim.x) {\n      ", R,
                  " acc[4] = {0, 0, 0, 0};\n      ", R, " m = -", inf, ", l = 0;\n",
                  "      for (I j0 = 0; j0 < key_end; j0 += (I)blockDim.x) {\n",
                  "        const I j = j0 + (I)threadIdx.x;\n        ", R, " score = -", inf, ";\n",
                  "        if (j < key_end) {\n          ", R, " dot = 0;\n          idx2[", r - 2,
                  "] = j;\n          for (I c = 0; c < d; ++c) {\n            idx1[", r - 1,
                  "] = c;\n", "            idx2[", r - 1, "] = c;\n", writer.space_code(1, "idx1"),
                  writer.space_code(2, "idx2"), "            dot += (", R, ")v", q, " * (", R, ")v",
                  k, ";\n          }\n          const ", R,
                  " anchor_value = dot * scale;\n          score = anchor_value;\n");
  if (program.anchor_operands.size() > 3) {
    absl::StrAppend(&s, "          idx4[", r - 1, "] = j;\n", writer.space_code(4, "idx4"),
                    "          score = (", R, ")v", program.anchor_operands[3], ";\n");
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
      "            idx3[", r - 2, "] = j0 + jj;\n", writer.space_code(3, "idx3"),
      "            acc[t] += probs[jj] * (", R, ")v", v, ";\n          }\n        }\n",
      "        m = new_max;\n        __syncthreads();\n      }\n",
      "      for (int t = 0; t < 4; ++t) {\n        const I c = c0 + t * (I)blockDim.x + "
      "(I)threadIdx.x;\n        if (c >= dv) continue;\n        idx0[",
      r - 1, "] = c;\n        const I flat = ", writer.flatten(0, "idx0"), ";\n        {\n",
      writer.epilogue("acc[t] / l", "flat"), "        }\n      }\n    }\n  }\n");
  return s;
}

// Operand `operand` (1: K, 2: V) when it is a plain load of a 16-bit input: its tiles can be
// copied to shared memory as they are stored. Null when a prologue computes it.
const jit::Instr* plain_load(const jit::KernelProgram& program, int operand) {
  const jit::Instr& in = program.instrs[program.anchor_operands[operand]];
  if (in.kind != jit::InstrKind::kLoad || program.input_dtypes[in.input] != in.dtype) {
    return nullptr;
  }
  return &in;
}

// The run-time test that `load` (over a space of rank `rank`) can be copied in 16-byte chunks
// along its last dim (the head dim): a 16-byte aligned pointer, unit stride along the head
// dim, offset and every other stride multiples of 8 elements (as the matmul core's).
std::string async_condition(const jit::Instr& load, int rank) {
  const int v = load.view;
  std::string s =
      absl::StrCat("((unsigned long long)a.in[", load.input, "] & 15) == 0 && a.offset[", v,
                   "] % 8 == 0 && a.stride[", v, "][", rank - 1, "] == 1");
  for (int d = 0; d + 1 < rank; ++d) absl::StrAppend(&s, " && a.stride[", v, "][", d, "] % 8 == 0");
  return s;
}

// The tensor-core form (see the top of the file). Shared memory: a 64 x 136 tile of K and
// one of V (16-bit, rows padded by 8 elements: the 8 rows an ldmatrix reads fall in distinct
// banks, and rows stay 16-byte aligned for cp.async), reused to stage Q's 128 rows before
// the sweep and the f32 output after it. The sweep is pipelined as FlashAttention-2 does
// with one buffer per operand: V of tile j is copied while S = Q Kᵀ of tile j is computed,
// and K of tile j + 1 while O += P V of tile j is. Each tile runs as two halves of 32 keys
// (S, softmax, P V), so half the scores are live at once: registers bound this kernel's
// occupancy, with Q's fragments and O's accumulators held for the whole sweep.
std::string tensor_core_attention(const KernelWriter& writer) {
  const jit::KernelProgram& program = writer.program();
  const int r = writer.rank(0);
  const int q = program.anchor_operands[0], k = program.anchor_operands[1],
            v = program.anchor_operands[2];
  const bool bf16 = program.instrs[q].dtype == DType::BF16;
  const std::string to16 = bf16 ? "f32_to_bf16" : "f32_to_f16";
  const std::string mma = bf16 ? "mma_bf16_16816" : "mma_f16_16816";
  const std::string inf = "(1.0f / 0.0f)";
  const jit::Instr* k_load = plain_load(program, 1);
  const jit::Instr* v_load = plain_load(program, 2);
  // Stages `rows` rows from `first` of space `space` (q: the queries, k/v: the keys) into
  // `tile` element by element through the prologue, as 16-bit values, zero past the edges.
  auto stage = [&](int space, int operand, const std::string& tile, int rows,
                   const std::string& first, const std::string& extent, const std::string& width,
                   const std::string& indent) {
    return absl::StrCat(
        indent, "for (int e = threadIdx.x; e < ", rows, " * 128; e += blockDim.x) {\n", indent,
        "  const int row = e >> 7, col = e & 127;\n", indent, "  float value = 0.0f;\n", indent,
        "  if (", first, " + row < ", extent, " && col < ", width, ") {\n", indent, "    idx",
        space, "[", r - 2, "] = ", first, " + row;\n", indent, "    idx", space, "[", r - 1,
        "] = col;\n", writer.space_code(space, absl::StrCat("idx", space)), indent,
        "    value = (float)v", operand, ";\n", indent, "  }\n", indent, "  ", tile,
        "[row][col] = ", to16, "(value);\n", indent, "}\n");
  };
  // Stages key tile `j0` of K (space 2) or V (space 3): by 16-byte cp.async when the operand
  // is a plain load and the launch allows it (zero-filled past the edges by src-size), else
  // element by element; then closes the thread's cp.async group either way.
  auto stage_keys = [&](int space, const jit::Instr* load, const std::string& name,
                        const std::string& width, const std::string& first,
                        const std::string& indent) {
    const std::string tile = name + "_tile", element = stage(space, space == 2 ? k : v, tile, 64,
                                                             first, "sk", width, indent + "  ");
    if (load == nullptr) return absl::StrCat(element, indent, "cp_async_commit();\n");
    return absl::StrCat(
        indent, "if (", name, "_async) {\n", indent,
        "  #pragma unroll  // 64 rows x 16 chunks of 8 elements over 256 threads\n", indent,
        "  for (int i = 0; i < 4; ++i) {\n", indent,
        "    const int c = threadIdx.x + i * 256, row = c >> 4, col = (c & 15) * 8;\n", indent,
        "    if (col >= (", width, " + 15) / 16 * 16) continue;  // columns no fragment reads\n",
        indent,
        "    // Elements of this chunk inside the matrix: 8, fewer at its edge, 0 past it.\n",
        indent, "    const I key = ", first, " + row, left = key < sk && col < ", width, " ? ",
        width, " - col : (I)0;\n", indent, "    cp_async_16(", name,
        "_shared + (row * 136 + col) * 2,\n", indent, "                left > 0 ? ", name,
        "_src + key * ", name, "_row_stride + col : ", name,
        "_src, left >= 8 ? 16 : (int)left * 2);\n", indent, "  }\n", indent, "} else {\n", element,
        indent, "}\n", indent, "cp_async_commit();\n");
  };
  // The start of the batch·head's K or V matrix and its row (key) stride, for cp.async.
  auto source = [&](int space, const jit::Instr* load, const std::string& name) {
    if (load == nullptr) return std::string();
    return absl::StrCat(
        "    idx", space, "[", r - 2, "] = 0;\n    idx", space, "[", r - 1,
        "] = 0;\n    const unsigned short* const ", name, "_src = (const unsigned short*)a.in[",
        load->input, "] + ", writer.offset(load->view, space, absl::StrCat("idx", space)), ";\n",
        "    const I ", name, "_row_stride = (I)a.stride[", load->view, "][", r - 2, "];\n");
  };
  std::string s = absl::StrCat(
      "  __shared__ Pack<unsigned short, 8> kv_packs[2 * 64 * 136 / 8];  // 16-byte aligned\n",
      "  unsigned short (*const k_tile)[136] = (unsigned short (*)[136])kv_packs[0].v;\n",
      "  unsigned short (*const v_tile)[136] = k_tile + 64;\n",
      "  float (*const out_tile)[128] = (float (*)[128])kv_packs[0].v;  // after the sweep\n",
      "  // Shared-window byte addresses, what ldmatrix and cp.async take.\n",
      "  const SharedAddress k_shared = shared_address(k_tile), v_shared = k_shared + 64 * 136 * "
      "2;\n",
      "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n",
      "  const int g = lane >> 2, t4 = lane & 3;  // a row pair and a column pair of fragments\n",
      "  const I d_steps = (d + 15) / 16, dv_tiles = (dv + 7) / 8;\n",
      "  const I q_tiles = (sq + 127) / 128, heads = sq > 0 ? rows / sq : (I)0;\n",
      "  // Whether K and V are copied by cp.async in this launch (the same for every tile).\n",
      "  const bool k_async = ",
      k_load != nullptr ? async_condition(*k_load, writer.rank(2)) : "false",
      ";\n  const bool v_async = ",
      v_load != nullptr ? async_condition(*v_load, writer.rank(3)) : "false",
      ";\n  (void)k_async; (void)v_async;\n",
      "  // The row this lane addresses in each ldmatrix.x4 (lane 8q + r gives row r of matrix\n",
      "  // q), in elements, at the first fragment; the orders of the matrices are given below.\n",
      "  const int q_frag = (warp * 16 + (lane & 15)) * 136 + (lane >> 4) * 8;\n",
      "  const int k_frag = ((lane & 7) + (lane >> 4) * 8) * 136 + ((lane >> 3) & 1) * 8;\n",
      "  const int v_frag = (lane & 15) * 136 + (lane >> 4) * 8;\n",
      "  for (I task = blockIdx.x; task < heads * q_tiles; task += gridDim.x) {\n",
      "    const I bh = task / q_tiles, i0 = task % q_tiles * 128;\n",
      open_indices(writer, r - 3, "bh"), "    const I wi = i0 + warp * 16;  // this warp's rows\n",
      "    // Q's 128 rows through both tiles, then each warp's A fragments by ldmatrix: "
      "matrices\n",
      "    // (rows 0-7, d 0-7), (rows 8-15, d 0-7), (rows 0-7, d 8-15), (rows 8-15, d 8-15).\n",
      stage(1, q, "k_tile", 128, "i0", "sq", "d", "    "), "    __syncthreads();\n",
      "    unsigned qf[8][4];\n",
      "    #pragma unroll\n    for (int ks = 0; ks < 8; ++ks) ldmatrix_x4(qf[ks], k_shared + "
      "(q_frag + ks * 16) * 2);\n",
      "    __syncthreads();\n", source(2, k_load, "k"), source(3, v_load, "v"),
      "    float o[16][4] = {{0}};\n    float m[2] = {-", inf, ", -", inf, "}, l[2] = {0, 0};\n",
      "    const I key_end = ", key_end(program, "i0 + 128"),
      ";  // keys any row of the block sees\n", "    if (key_end > 0) {  // K of the first tile\n",
      stage_keys(2, k_load, "k", "d", "(I)0", "      "), "    }\n",
      "    for (I j0 = 0; j0 < key_end; j0 += 64) {\n",
      "      // V of this tile is copied while S = Q Kᵀ of its first half is computed.\n",
      stage_keys(3, v_load, "v", "dv", "j0", "      "),
      "      cp_async_wait<1>();  // this thread's copies of K have landed\n",
      "      __syncthreads();     // and everyone's\n",
      "      // Two halves of 32 keys, each S = Q Kᵀ, the online softmax and O += P V: half\n",
      "      // the live scores of a 64-key S (registers, not speed, bound this kernel).\n",
      "      #pragma unroll\n      for (int half = 0; half < 2; ++half) {\n",
      "        const I jh = j0 + half * 32;  // the half's first key\n",
      "        float s[4][4] = {{0}};\n", "        #pragma unroll\n",
      "        for (int ks = 0; ks < 8; ++ks) {\n", "          if (ks >= d_steps) break;\n",
      "          #pragma unroll\n          for (int nt = 0; nt < 4; nt += 2) {\n",
      "            // K as [key][d] is Kᵀ's B fragment: matrices (keys 0-7, d 0-7), (keys 0-7,\n",
      "            // d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15).\n",
      "            unsigned kf[4];\n",
      "            ldmatrix_x4(kf, k_shared + (k_frag + (half * 32 + nt * 8) * 136 + ks * 16) * "
      "2);\n",
      "            ", mma, "(s[nt], qf[ks], kf);\n", "            ", mma,
      "(s[nt + 1], qf[ks], kf + 2);\n", "          }\n        }\n",
      "        // The scores: scale, score ops, edges and the causal cut; then the online "
      "softmax.\n",
      "        float tile_max[2] = {-", inf, ", -", inf, "};\n",
      "        #pragma unroll\n        for (int e = 0; e < 16; ++e) {\n",
      "          const int nt = e >> 2, c = e & 3;\n",
      "          const I i = wi + g + (c >= 2 ? 8 : 0), j = jh + nt * 8 + t4 * 2 + (c & 1);\n",
      "          float score = s[nt][c] * scale;\n");
  if (program.anchor_operands.size() > 3) {
    absl::StrAppend(
        &s, "          if (i < sq && j < sk) {\n            const float anchor_value = score;\n",
        "            idx4[", r - 2, "] = i;\n            idx4[", r - 1, "] = j;\n",
        writer.space_code(4, "idx4"), "            score = (float)v", program.anchor_operands[3],
        ";\n          }\n");
  }
  absl::StrAppend(
      &s, "          if (i >= sq || j >= sk",
      program.anchor_attrs.causal ? " || j > i + causal_offset" : "", ") score = -", inf, ";\n",
      "          s[nt][c] = score;\n          tile_max[c >> 1] = fmaxf(tile_max[c >> 1], score);\n",
      "        }\n", "        float alpha[2], base[2], tile_sum[2] = {0, 0};\n",
      "        #pragma unroll\n        for (int h = 0; h < 2; ++h) {  // the 4 threads of a row\n",
      "          tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));\n",
      "          tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));\n",
      "          const float new_max = fmaxf(m[h], tile_max[h]);\n",
      "          // A row all -inf so far subtracts 0: no NaN before its end (0 / 0 there).\n",
      "          base[h] = new_max == -", inf, " ? 0.0f : new_max;\n",
      "          alpha[h] = expf(m[h] - base[h]);\n          m[h] = new_max;\n        }\n",
      "        #pragma unroll\n        for (int e = 0; e < 16; ++e) {\n",
      "          const int nt = e >> 2, c = e & 3;\n",
      "          s[nt][c] = expf(s[nt][c] - base[c >> 1]);\n",
      "          tile_sum[c >> 1] += s[nt][c];\n", "        }\n",
      "        #pragma unroll\n        for (int h = 0; h < 2; ++h) {\n",
      "          tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 1);\n",
      "          tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 2);\n",
      "          l[h] = l[h] * alpha[h] + tile_sum[h];\n        }\n",
      "        #pragma unroll\n        for (int nt = 0; nt < 16; ++nt) {\n",
      "          #pragma unroll\n          for (int c = 0; c < 4; ++c) o[nt][c] *= alpha[c >> "
      "1];\n",
      "        }\n",
      "        // P as 16-bit A fragments: S's accumulators of key tiles 2kk and 2kk+1 are the A\n",
      "        // fragment of the half's keys 16kk to 16kk+15.\n", "        unsigned pf[2][4];\n",
      "        #pragma unroll\n        for (int kk = 0; kk < 2; ++kk) {\n",
      "          #pragma unroll\n          for (int c = 0; c < 4; ++c) {\n",
      "            pf[kk][c] = pack2(", to16, "(s[2 * kk + (c >> 1)][(c & 1) * 2]),\n",
      "                              ", to16, "(s[2 * kk + (c >> 1)][(c & 1) * 2 + 1]));\n",
      "          }\n        }\n",
      "        if (half == 0) cp_async_wait<0>();  // this thread's copies of V have landed\n",
      "        __syncthreads();  // half 0: everyone's V has landed; half 1: all are done with K\n",
      "        if (half == 1 && j0 + 64 < key_end) {\n",
      "          // K of the next tile is copied while O += P V of this half is computed.\n",
      stage_keys(2, k_load, "k", "d", "(j0 + 64)", "          "), "        }\n",
      "        // O += P V.\n",
      "        #pragma unroll\n        for (int kk = 0; kk < 2; ++kk) {\n",
      "          #pragma unroll\n          for (int nt = 0; nt < 16; nt += 2) {\n",
      "            if (nt >= dv_tiles) break;\n",
      "            // V as [key][dv], transposed: matrices (keys 0-7, dv 0-7), (keys 8-15,\n",
      "            // dv 0-7), (keys 0-7, dv 8-15), (keys 8-15, dv 8-15).\n",
      "            unsigned vf[4];\n",
      "            ldmatrix_x4_trans(vf, v_shared + (v_frag + (half * 32 + kk * 16) * 136 + nt * "
      "8) * 2);\n",
      "            ", mma, "(o[nt], pf[kk], vf);\n", "            ", mma,
      "(o[nt + 1], pf[kk], vf + 2);\n", "          }\n        }\n      }\n",
      "      __syncthreads();  // everyone is done with V before the next tile's is staged\n",
      "    }\n",

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
      r - 1, "] = ch;\n        const I flat = ", writer.flatten(0, "idx0"), ";\n        {\n",
      writer.epilogue("out_tile[row][ch]", "flat"),
      "        }\n      }\n      __syncthreads();\n    }\n", "  }\n");
  return s;
}

}  // namespace

bool attention_uses_tensor_cores(const jit::KernelProgram& program,
                                 const jit::KernelLaunch& launch) {
  if (program.anchor != jit::AnchorKind::kAttention) return false;
  const DType dt = program.instrs[program.anchor_operands[0]].dtype;
  const int r = program.space_ranks[1];
  return (dt == DType::F16 || dt == DType::BF16) && launch.spaces[1][r - 1] <= 128 &&
         launch.spaces[3][r - 1] <= 128;
}

std::string render_attention(const KernelWriter& writer) {
  const jit::KernelProgram& program = writer.program();
  const std::string R = program.anchor_dtype == DType::F64 ? "double" : "float";
  const DType dt = program.instrs[program.anchor_operands[0]].dtype;
  std::string s = sizes(writer, R);
  if (dt != DType::F16 && dt != DType::BF16) return s + portable_attention(writer, R);
  // The same test as attention_uses_tensor_cores, which sizes the grid.
  return absl::StrCat(s, "  if (d <= 128 && dv <= 128) {\n", tensor_core_attention(writer),
                      "  } else {\n", portable_attention(writer, R), "  }\n");
}

}  // namespace kiln::runtime::cuda
