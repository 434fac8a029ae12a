#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::AnchorKind;
using jit::KernelProgram;

namespace {

// Sets idx<space>'s batch dims from the output multi-index `out` (broadcast dims read 0).
std::string batch_indices(const KernelWriter& w, int space, int batch) {
  std::string s;
  const int r = w.rank(space);
  for (int j = 0; j < r - 2; ++j) {
    absl::StrAppend(&s, "    idx", space, "[", j, "] = a.shape[", space, "][", j,
                    "] == 1 ? 0 : out[", jit::matmul_batch_dim(r, batch, j), "];\n");
  }
  return s;
}

// Tiled matmuls: a block computes a 64x64 output tile. Each k-step of 16 stages a 64x16
// slice of A and a 16x64 slice of B in shared memory (every element computed through its
// prologue, zero past the edges), then:
//  - f16/bf16 (tensor cores): each of the 8 warps (4 down, 2 across) multiplies its 16x32
//    part with four mma.sync m16n8k16 (f32 accumulators), fragments laid out as PTX's
//    "Matrix Fragments for mma.m16n8k16 with floating point type";
//  - f32 (CUDA cores, full f32: no silent TF32): each thread accumulates a 4x4 block of
//    the tile, in k order as the one-thread-per-output kernel did.
// The epilogue runs on each accumulator element.
std::string tiled_matmul(const KernelWriter& w) {
  const KernelProgram& p = w.program();
  std::string s;
  const int ra = w.rank(1), rb = w.rank(2), r0 = w.rank(0);
  const int batch = r0 - 2;
  const bool tensor_cores = matmul_uses_tensor_cores(p);
  const bool bf16 = p.instrs[p.anchor_operands[0]].dtype == DType::BF16;
  const std::string staged = tensor_cores ? "unsigned short" : "float";
  const std::string to_staged = tensor_cores ? (bf16 ? "f32_to_bf16" : "f32_to_f16") : "";
  const std::string t = register_type(p.anchor_dtype);
  auto stage = [&](int space, int operand, const std::string& first, const std::string& second,
                   const std::string& bounds, const std::string& target) {
    return absl::StrCat("        if (", bounds, ") {\n          idx", space, "[", w.rank(space) - 2,
                        "] = ", first, ";\n          idx", space, "[", w.rank(space) - 1,
                        "] = ", second, ";\n", w.space_code(space, absl::StrCat("idx", space)),
                        "          value = v", operand, ";\n        }\n        ", target, " = ",
                        to_staged, "(value);\n");
  };
  absl::StrAppend(
      &s, "  const I M = (I)a.shape[1][", ra - 2, "], N = (I)a.shape[2][", rb - 1,
      "], depth = (I)a.shape[1][", ra - 1, "];\n",
      "  const I tiles_m = (M + 63) / 64, tiles_n = (N + 63) / 64;\n",
      "  const I tiles = M * N > 0 ? (", w.numel(0), ") / (M * N) * tiles_m * tiles_n : (I)0;\n",
      "  __shared__ ", staged, " tile_a[64][16 + 8];  // padded against bank conflicts\n",
      "  __shared__ ", staged, " tile_b[16][64 + 8];\n",
      "  __shared__ float tile_out[64][64 + 1];\n",
      "  for (I tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n",
      "    const I b = tile / (tiles_m * tiles_n), rest = tile % (tiles_m * tiles_n);\n",
      "    const I m0 = rest / tiles_n * 64, n0 = rest % tiles_n * 64;\n    ",
      w.unravel(0, "out", "b * M * N"), "    I idx1[", w.index_rank(), "] = {0};\n    I idx2[",
      w.index_rank(), "] = {0};\n", batch_indices(w, 1, batch), batch_indices(w, 2, batch),
      "    float acc[4][4] = {{0}};\n", "    for (I k0 = 0; k0 < depth; k0 += 16) {\n",
      "      for (int e = threadIdx.x; e < 64 * 16; e += blockDim.x) {\n",
      "        const int row = e >> 4, kk = e & 15;\n",
      "        const I m = m0 + row, k = k0 + kk;\n        float value = 0.0f;\n",
      stage(1, p.anchor_operands[0], "m", "k", "m < M && k < depth", "tile_a[row][kk]"),
      "      }\n      for (int e = threadIdx.x; e < 16 * 64; e += blockDim.x) {\n",
      "        const int kk = e >> 6, col = e & 63;\n",
      "        const I k = k0 + kk, n = n0 + col;\n        float value = 0.0f;\n",
      stage(2, p.anchor_operands[1], "k", "n", "k < depth && n < N", "tile_b[kk][col]"),
      "      }\n      __syncthreads();\n");
  // Where in the 64x64 tile accumulator acc[x][y] of this thread belongs.
  std::string row, col;
  if (tensor_cores) {
    absl::StrAppend(
        &s, "      const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n",
        "      const int group = lane >> 2, thread_in_group = lane & 3;\n",
        "      const int warp_m = (warp & 3) * 16, warp_n = (warp >> 2) * 32;\n",
        "      // A fragment: a0,a1 (row g) a2,a3 (row g+8) at cols 2t,2t+1; a4..a7 the same at "
        "+8.\n",
        "      const int ar = warp_m + group, ac = thread_in_group * 2;\n",
        "      const unsigned fa[4] = {pack2(tile_a[ar][ac], tile_a[ar][ac + 1]),\n",
        "                              pack2(tile_a[ar + 8][ac], tile_a[ar + 8][ac + 1]),\n",
        "                              pack2(tile_a[ar][ac + 8], tile_a[ar][ac + 9]),\n",
        "                              pack2(tile_a[ar + 8][ac + 8], tile_a[ar + 8][ac + 9])};\n",
        "      #pragma unroll\n      for (int nt = 0; nt < 4; ++nt) {\n",
        "        // B fragment: b0,b1 at k = 2t,2t+1 and b2,b3 at k + 8, column g.\n",
        "        const int bc = warp_n + nt * 8 + group, bk = thread_in_group * 2;\n",
        "        const unsigned fb[2] = {pack2(tile_b[bk][bc], tile_b[bk + 1][bc]),\n",
        "                                pack2(tile_b[bk + 8][bc], tile_b[bk + 9][bc])};\n",
        "        ", bf16 ? "mma_bf16_16816" : "mma_f16_16816", "(acc[nt], fa, fb);\n      }\n");
    // Accumulator c_i of n-tile x: row g (i < 2) or g + 8, column 2t + (i & 1).
    row = "((threadIdx.x >> 5) & 3) * 16 + ((threadIdx.x & 31) >> 2) + (y >= 2 ? 8 : 0)";
    col = "(threadIdx.x >> 7) * 32 + x * 8 + (threadIdx.x & 3) * 2 + (y & 1)";
  } else {
    absl::StrAppend(&s,
                    "      const int tr = (threadIdx.x >> 4) * 4, tc = (threadIdx.x & 15) * 4;\n",
                    "      #pragma unroll\n      for (int kk = 0; kk < 16; ++kk) {\n",
                    "        #pragma unroll\n        for (int x = 0; x < 4; ++x) {\n",
                    "          #pragma unroll\n          for (int y = 0; y < 4; ++y) acc[x][y] += "
                    "tile_a[tr + x][kk] * tile_b[kk][tc + y];\n        }\n      }\n");
    row = "(threadIdx.x >> 4) * 4 + x";
    col = "(threadIdx.x & 15) * 4 + y";
  }
  // The accumulators go through shared memory, so the epilogue is written once (not once
  // per unrolled accumulator: that multiplied compile time) and its stores coalesce.
  absl::StrAppend(&s, "      __syncthreads();\n    }\n",
                  "    #pragma unroll\n    for (int x = 0; x < 4; ++x) {\n",
                  "      #pragma unroll\n      for (int y = 0; y < 4; ++y) tile_out[", row, "][",
                  col, "] = acc[x][y];\n    }\n    __syncthreads();\n",
                  "    for (int e = threadIdx.x; e < 64 * 64; e += blockDim.x) {\n",
                  "      const I m = m0 + (e >> 6), n = n0 + (e & 63);\n",
                  "      if (m >= M || n >= N) continue;\n",
                  "      const I flat = (b * M + m) * N + n;\n",
                  w.epilogue(absl::StrCat("(", t, ")tile_out[e >> 6][e & 63]"), "flat"), "    }\n",
                  "    __syncthreads();\n  }\n");
  return s;
}

}  // namespace

bool matmul_uses_tensor_cores(const jit::KernelProgram& p) {
  if (p.anchor != AnchorKind::kMatmul || p.space_ranks[1] < 2 || p.space_ranks[2] < 2) return false;
  const DType a = p.instrs[p.anchor_operands[0]].dtype, b = p.instrs[p.anchor_operands[1]].dtype;
  return a == b && (a == DType::F16 || a == DType::BF16);
}

bool matmul_is_tiled(const jit::KernelProgram& p) {
  if (matmul_uses_tensor_cores(p)) return true;
  if (p.anchor != AnchorKind::kMatmul || p.space_ranks[1] < 2 || p.space_ranks[2] < 2) return false;
  return p.instrs[p.anchor_operands[0]].dtype == DType::F32 &&
         p.instrs[p.anchor_operands[1]].dtype == DType::F32;
}

// Tiled when matmul_is_tiled; otherwise one thread per output element: a dot product over the
// shared dimension.
std::string render_matmul(const KernelWriter& w) {
  const KernelProgram& p = w.program();
  if (matmul_is_tiled(p)) return tiled_matmul(w);
  std::string s;
  const int ra = w.rank(1), rb = w.rank(2), r0 = w.rank(0);
  const int batch = r0 - (ra > 1) - (rb > 1);
  const std::string t = register_type(p.anchor_dtype);
  absl::StrAppend(
      &s, "  const I total = ", w.numel(0), ";\n  const I depth = (I)a.shape[1][", ra - 1, "];\n",
      "  for (I i = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * "
      "(I)blockDim.x) {\n    ",
      w.unravel(0, "out", "i"), "    I idx1[", w.index_rank(), "] = {0};\n    I idx2[",
      w.index_rank(), "] = {0};\n");
  s += batch_indices(w, 1, batch) + batch_indices(w, 2, batch);
  if (ra > 1) absl::StrAppend(&s, "    idx1[", ra - 2, "] = out[", batch, "];\n");
  if (rb > 1) absl::StrAppend(&s, "    idx2[", rb - 1, "] = out[", r0 - 1, "];\n");
  const std::string acc =
      is_floating(p.anchor_dtype) ? (p.anchor_dtype == DType::F64 ? "double" : "float") : "i64";
  absl::StrAppend(&s, "    ", acc, " sum = 0;\n    for (I k = 0; k < depth; ++k) {\n      idx1[",
                  ra - 1, "] = k;\n      idx2[", rb > 1 ? rb - 2 : 0, "] = k;\n",
                  w.space_code(1, "idx1"), w.space_code(2, "idx2"), "      sum = ",
                  is_floating(p.anchor_dtype)
                      ? absl::StrCat("sum + v", p.anchor_operands[0], " * v", p.anchor_operands[1])
                      : absl::StrCat("kiln::math::wrapping_add(sum, kiln::math::wrapping_mul(v",
                                     p.anchor_operands[0], ", v", p.anchor_operands[1], "))"),
                  ";\n    }\n", w.epilogue(absl::StrCat("(", t, ")sum"), "i"), "  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
