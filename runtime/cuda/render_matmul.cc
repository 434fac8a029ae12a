#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::AnchorKind;
using jit::KernelProgram;

namespace {

// Sets idx<space>'s batch dims from the output multi-index `out` (broadcast dims read 0).
std::string batch_indices(const KernelWriter& writer, int space, int batch) {
  std::string s;
  const int r = writer.rank(space);
  for (int j = 0; j < r - 2; ++j) {
    absl::StrAppend(&s, "    idx", space, "[", j, "] = a.shape[", space, "][", j,
                    "] == 1 ? 0 : out[", jit::matmul_batch_dim(r, batch, j), "];\n");
  }
  return s;
}

// f32 matmuls on CUDA cores (full f32: no silent TF32): a block computes a 64x64 output
// tile. Each k-step of 16 stages a 64x16 slice of A and a 16x64 slice of B in shared memory
// (every element computed through its prologue, zero past the edges), then each thread
// accumulates a 4x4 block of the tile, in k order as the one-thread-per-output kernel did.
// The epilogue runs on each accumulator element.
std::string tiled_matmul_f32(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  std::string s;
  const int ra = writer.rank(1), rb = writer.rank(2), r0 = writer.rank(0);
  const int batch = r0 - 2;
  const std::string t = register_type(program.anchor_dtype);
  auto stage = [&](int space, int operand, const std::string& first, const std::string& second,
                   const std::string& bounds, const std::string& target) {
    return absl::StrCat("        if (", bounds, ") {\n          idx", space, "[",
                        writer.rank(space) - 2, "] = ", first, ";\n          idx", space, "[",
                        writer.rank(space) - 1, "] = ", second, ";\n",
                        writer.space_code(space, absl::StrCat("idx", space)), "          value = v",
                        operand, ";\n        }\n        ", target, " = value;\n");
  };
  absl::StrAppend(
      &s, "  const I M = (I)a.shape[1][", ra - 2, "], N = (I)a.shape[2][", rb - 1,
      "], depth = (I)a.shape[1][", ra - 1, "];\n",
      "  const I tiles_m = (M + 63) / 64, tiles_n = (N + 63) / 64;\n",
      "  const I tiles = M * N > 0 ? (", writer.numel(0),
      ") / (M * N) * tiles_m * tiles_n : (I)0;\n",
      "  __shared__ float tile_a[64][16 + 8];  // padded against bank conflicts\n",
      "  __shared__ float tile_b[16][64 + 8];\n", "  __shared__ float tile_out[64][64 + 1];\n",
      "  for (I tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n",
      "    const I b = tile / (tiles_m * tiles_n), rest = tile % (tiles_m * tiles_n);\n",
      "    const I m0 = rest / tiles_n * 64, n0 = rest % tiles_n * 64;\n    ",
      writer.unravel(0, "out", "b * M * N"), "    I idx1[", writer.index_rank(),
      "] = {0};\n    I idx2[", writer.index_rank(), "] = {0};\n", batch_indices(writer, 1, batch),
      batch_indices(writer, 2, batch), "    float acc[4][4] = {{0}};\n",
      "    for (I k0 = 0; k0 < depth; k0 += 16) {\n",
      "      for (int e = threadIdx.x; e < 64 * 16; e += blockDim.x) {\n",
      "        const int row = e >> 4, kk = e & 15;\n",
      "        const I m = m0 + row, k = k0 + kk;\n        float value = 0.0f;\n",
      stage(1, program.anchor_operands[0], "m", "k", "m < M && k < depth", "tile_a[row][kk]"),
      "      }\n      for (int e = threadIdx.x; e < 16 * 64; e += blockDim.x) {\n",
      "        const int kk = e >> 6, col = e & 63;\n",
      "        const I k = k0 + kk, n = n0 + col;\n        float value = 0.0f;\n",
      stage(2, program.anchor_operands[1], "k", "n", "k < depth && n < N", "tile_b[kk][col]"),
      "      }\n      __syncthreads();\n");
  absl::StrAppend(&s, "      const int tr = (threadIdx.x >> 4) * 4, tc = (threadIdx.x & 15) * 4;\n",
                  "      #pragma unroll\n      for (int kk = 0; kk < 16; ++kk) {\n",
                  "        #pragma unroll\n        for (int x = 0; x < 4; ++x) {\n",
                  "          #pragma unroll\n          for (int y = 0; y < 4; ++y) acc[x][y] = "
                  "fmaf(tile_a[tr + x][kk], tile_b[kk][tc + y], acc[x][y]);\n        }\n      }\n");
  // Where in the 64x64 tile accumulator acc[x][y] of this thread belongs.
  const std::string row = "(threadIdx.x >> 4) * 4 + x", col = "(threadIdx.x & 15) * 4 + y";
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
                  writer.epilogue(absl::StrCat("(", t, ")tile_out[e >> 6][e & 63]"), "flat"),
                  "    }\n", "    __syncthreads();\n  }\n");
  return s;
}

// ---- 16-bit matmuls on tensor cores ----
//
// (And 8-bit float ones: e4m3 and e5m2 values are staged as f16, exactly, and multiplied by
// the f16 mma. On sm_90 that is what mma.sync with e4m3 operands compiles to as well
// (F2FP.F16.E4M3.UNPACK_B, then HMMA); Hopper's own fp8 rate needs wgmma.)
//
// A block computes a kRows x 128 output tile: kRows = 128 (8 warps as 2 down x 4 across,
// each a 64x32 warp tile: 4x4 mma.sync m16n8k16 per 16-deep k slice) or, when M <= 16
// (decode, GEMV), kRows = 16 (8 warps across, each 16x16), so a one-row product does not
// multiply 127 rows of zeros. Why 8 warps of 64x32: 64 f32 accumulators, 16 A and 8 B
// fragment registers per thread keep a thread under 128 registers (two blocks, 16 warps,
// per SM), and each 16-deep slice takes 6 ldmatrix.x4 for 16 mma.
//
// Each 32-deep k-step stages an A tile (kRows x 32, k-contiguous) and a B tile in shared
// memory, double-buffered: the copies of step s+1 are issued before step s is multiplied.
// An operand that is a plain load of a 16-bit buffer whose strides allow it (checked at run
// time: 16-byte aligned pointer, offset and strides multiples of 8 elements, unit stride
// along its shared-memory rows) is copied with 16-byte cp.async, zero-filled past the
// matrix edges (src-size below 16); any other operand (a fused prologue, or strides that do
// not allow 16-byte copies) is computed element by element through its prologue, as before,
// into the same layout.
// Fragments come from shared memory by ldmatrix.x4: A as stored; B as stored when it is
// k-contiguous (a [N, K] weight, what `linear` passes), with .trans when n-contiguous
// ([K, N] row-major). Rows are padded by 8 elements (16 bytes) so the 8 rows an ldmatrix
// reads fall in distinct banks. Two stages of a 128-row tile take 37-40 KiB, under the 48
// KiB of static shared memory; a third would need dynamic shared memory (and the opt-in)
// for what two resident blocks per SM already hide.
//
// After the k loop the accumulators go through the same shared memory in halves of 64 rows,
// so the epilogue is written once and its stores coalesce. With too few tiles to fill the
// GPU, launch_geometry splits K over gridDim.y (Split phases 1 and 2, as reductions do).

constexpr int kPaddedK = 40;   // a k-contiguous tile row: 32 elements + 8 of padding
constexpr int kPaddedN = 136;  // an n-contiguous B tile row: 128 elements + 8 of padding

// Operand `operand` (0: A, 1: B) when it is a plain load of a 16-bit input: its tiles can be
// copied to shared memory as they are stored. Null when a prologue computes it, or when it
// is an 8-bit float, converted to f16 as it is staged.
const jit::Instr* plain_load(const KernelProgram& program, int operand) {
  const jit::Instr& in = program.instrs[program.anchor_operands[operand]];
  if (in.kind != jit::InstrKind::kLoad || program.input_dtypes[in.input] != in.dtype ||
      dtype_size(in.dtype) != 2) {
    return nullptr;
  }
  return &in;
}

// Whether B's tile is stored k-contiguous ([n][k]): when B is a load (of any width) through a
// strided view, which is what a transposed weight is; n-contiguous ([k][n]) otherwise.
bool b_is_k_contiguous(const KernelProgram& program) {
  const jit::Instr& b = program.instrs[program.anchor_operands[1]];
  return b.kind == jit::InstrKind::kLoad && program.input_dtypes[b.input] == b.dtype &&
         program.view_patterns[b.view].access == jit::ViewAccess::kStrided;
}

// The run-time test that `load` (over a space of rank `rank`) can be copied in 16-byte
// chunks whose elements step along dim `unit_dim`.
std::string async_condition(const jit::Instr& load, int rank, int unit_dim) {
  const int v = load.view;
  std::string s =
      absl::StrCat("((unsigned long long)a.in[", load.input, "] & 15) == 0 && a.offset[", v,
                   "] % 8 == 0 && a.stride[", v, "][", unit_dim, "] == 1");
  for (int d = 0; d < rank; ++d) {
    if (d != unit_dim) absl::StrAppend(&s, " && a.stride[", v, "][", d, "] % 8 == 0");
  }
  return s;
}

// The copy of one k-step's tile of operand `operand` by cp.async: `chunks` 16-byte chunks,
// chunk c at row c / per_row, element (c % per_row) * 8 of that row; `outer`/`inner` are the
// matrix indices of a row and of its elements, `stride` the source's row stride.
std::string async_stage(const std::string& tile, const std::string& src, const std::string& chunks,
                        int per_row, int padded, const std::string& outer, const std::string& inner,
                        const std::string& outer_end, const std::string& inner_end,
                        const std::string& stride) {
  const int shift = per_row == 4 ? 2 : 4;
  return absl::StrCat(
      "          #pragma unroll  // a fixed count per thread: ", chunks, " over ", kThreadsPerBlock,
      " threads\n          for (int i = 0; i < (", chunks, " + ", kThreadsPerBlock - 1, ") / ",
      kThreadsPerBlock, "; ++i) {\n", "            const int c = threadIdx.x + i * ",
      kThreadsPerBlock, ";\n            if ((", chunks, ") % ", kThreadsPerBlock,
      " != 0 && c >= ", chunks, ") break;\n", "            const int row = c >> ", shift,
      ", col = (c & ", per_row - 1, ") * 8;\n", "            const I ", outer, " = ", outer,
      "0 + row, ", inner, " = ", inner, "0 + col;\n",
      "            // Elements of this chunk inside the matrix: 8, fewer at its edge, 0 past it.\n",
      "            const I left = ", outer, " < ", outer_end, " && ", inner, " < ", inner_end,
      " ? ", inner_end, " - ", inner, " : (I)0;\n", "            cp_async_16(", tile, " + (row * ",
      padded, " + col) * 2, left > 0 ? ", src, " + ", outer, " * ", stride, " + ", inner, " : ",
      src, ", left >= 8 ? 16 : (int)left * 2);\n", "          }\n");
}

// The per-element staging of one k-step's tile of space `space`: every element through the
// prologue (zero past the edges), rounded to 16 bits. Element e of `count` is at tile row
// e >> shift and column e & ((1 << shift) - 1), matrix position `outer` (the row's) and
// `inner`; `dim0` and `dim1` name which of them index the space's last two dims.
std::string element_stage(const KernelWriter& writer, int space, int operand,
                          const std::string& tile, const std::string& count, int shift, int padded,
                          const std::string& outer, const std::string& inner,
                          const std::string& outer_end, const std::string& inner_end,
                          const std::string& dim0, const std::string& dim1,
                          const std::string& to_16) {
  const std::string idx = absl::StrCat("idx", space);
  return absl::StrCat(
      "          for (int e = threadIdx.x; e < ", count, "; e += blockDim.x) {\n",
      "            const int row = e >> ", shift, ", col = e & ", (1 << shift) - 1, ";\n",
      "            const I ", outer, " = ", outer, "0 + row, ", inner, " = ", inner, "0 + col;\n",
      "            float value = 0.0f;\n            if (", outer, " < ", outer_end, " && ", inner,
      " < ", inner_end, ") {\n              ", idx, "[", writer.rank(space) - 2, "] = ", dim0,
      ";\n              ", idx, "[", writer.rank(space) - 1, "] = ", dim1, ";\n",
      writer.space_code(space, idx), "              value = v", operand, ";\n            }\n",
      "            ", tile, "[row * ", padded, " + col] = ", to_16, "(value);\n          }\n");
}

// `code` with every line indented two more spaces (a loop placed inside an if).
std::string indented(const std::string& code) {
  return "  " + absl::StrReplaceAll(code.substr(0, code.size() - 1), {{"\n", "\n  "}}) + "\n";
}

// Both operands' staging for k-step `step` into buffer step & 1.
std::string stage_k_step(const KernelWriter& writer, bool a_plain, bool b_plain,
                         bool b_k_contiguous, const std::string& to_16) {
  const KernelProgram& program = writer.program();
  std::string s =
      "        if (step < steps) {  // stage k-step `step` while step - 1 is multiplied\n"
      "          unsigned short* const a_tile = smem + (int)(step & 1) * kStage;\n"
      "          unsigned short* const b_tile = a_tile + kRows * 40;\n"
      "          const SharedAddress a_shared = smem_address + (int)(step & 1) * kStage * 2;\n"
      "          const SharedAddress b_shared = a_shared + kRows * 40 * 2;\n"
      "          const I k0 = (first_step + step) * 32;\n";
  const std::string a_elements =
      element_stage(writer, 1, program.anchor_operands[0], "a_tile", "kRows * 32", 5, kPaddedK, "m",
                    "k", "M", "depth", "m", "k", to_16);
  if (a_plain) {
    absl::StrAppend(&s, "          if (a_async) {\n",
                    indented(async_stage("a_shared", "a_src", "kRows * 4", 4, kPaddedK, "m", "k",
                                         "M", "depth", "a_row_stride")),
                    "          } else {\n", indented(a_elements), "          }\n");
  } else {
    s += a_elements;
  }
  const std::string b_elements =
      b_k_contiguous ? element_stage(writer, 2, program.anchor_operands[1], "b_tile", "128 * 32", 5,
                                     kPaddedK, "n", "k", "N", "depth", "k", "n", to_16)
                     : element_stage(writer, 2, program.anchor_operands[1], "b_tile", "32 * 128", 7,
                                     kPaddedN, "k", "n", "depth", "N", "k", "n", to_16);
  if (b_plain) {
    absl::StrAppend(
        &s, "          if (b_async) {\n",
        indented(b_k_contiguous ? async_stage("b_shared", "b_src", "128 * 4", 4, kPaddedK, "n", "k",
                                              "N", "depth", "b_row_stride")
                                : async_stage("b_shared", "b_src", "32 * 16", 16, kPaddedN, "k",
                                              "n", "depth", "N", "b_row_stride")),
        "          } else {\n", indented(b_elements), "          }\n");
  } else {
    s += b_elements;
  }
  return s + "        }\n        cp_async_commit();\n";
}

// The multiply of one staged k-step: two 16-deep slices, each kMi ldmatrix.x4 for A,
// kNi / 2 for B (two n8 tiles each) and kMi * kNi mma.
std::string multiply_k_step(bool b_k_contiguous, bool bf16) {
  const std::string b_load =
      b_k_contiguous
          ? "            // B as [n][k]: matrices (n 0-7, k 0-7), (n 0-7, k 8-15),\n"
            "            // (n 8-15, k 0-7), (n 8-15, k 8-15).\n"
            "            ldmatrix_x4(r, b_tile + (b_frag + j * 8 * 40 + kk) * 2);\n"
          : "            // B as [k][n], transposed: matrices (k 0-7, n 0-7), (k 8-15, n 0-7),\n"
            "            // (k 0-7, n 8-15), (k 8-15, n 8-15).\n"
            "            ldmatrix_x4_trans(r, b_tile + (b_frag + kk * 136 + j * 8) * 2);\n";
  return absl::StrCat(
      "        cp_async_wait<1>();  // this thread's copies of step - 1 have landed\n",
      "        __syncthreads();     // and everyone's\n",
      "        // Shared-window byte addresses of the buffer multiplied.\n",
      "        const SharedAddress a_tile = smem_address + (int)((step - 1) & 1) * kStage * 2;\n",
      "        const SharedAddress b_tile = a_tile + kRows * 40 * 2;\n",
      "        #pragma unroll\n        for (int kk = 0; kk < 32; kk += 16) {\n",
      "          unsigned fa[kMi][4], fb[kNi][2];\n",
      "          // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),\n",
      "          // (rows 8-15, k 8-15) are a0a1, a2a3, a4a5, a6a7 of mma's A fragment.\n",
      "          #pragma unroll\n          for (int i = 0; i < kMi; ++i) ldmatrix_x4(fa[i], a_tile "
      "+ (a_frag + i * 16 * 40 + kk) * 2);\n",
      "          #pragma unroll\n          for (int j = 0; j < kNi; j += 2) {\n",
      "            unsigned r[4];\n", b_load,
      "            fb[j][0] = r[0]; fb[j][1] = r[1]; fb[j + 1][0] = r[2]; fb[j + 1][1] = r[3];\n",
      "          }\n          #pragma unroll\n          for (int i = 0; i < kMi; ++i) {\n",
      "            #pragma unroll\n            for (int j = 0; j < kNi; ++j) ",
      bf16 ? "mma_bf16_16816" : "mma_f16_16816",
      "(acc[i][j], fa[i], fb[j]);\n          }\n        }\n",
      "        __syncthreads();  // everyone is done with this buffer before it is restaged\n");
}

// The epilogue: the accumulators through shared memory, kRows / kWarpsM rows at a time.
std::string tile_epilogue(const KernelWriter& writer) {
  const std::string t = register_type(writer.program().anchor_dtype);
  return absl::StrCat(
      "      float* const tile_out = (float*)smem;  // [kRows / kWarpsM][132]\n",
      "      constexpr int kPassRows = kRows / kWarpsM;\n",
      "      for (int pass = 0; pass < kWarpsM; ++pass) {\n", "        if (warp_m == pass) {\n",
      "          // Accumulator r of mma (i, j): row g (r < 2) or g + 8, column 2t + (r & 1).\n",
      "          #pragma unroll\n          for (int i = 0; i < kMi; ++i) {\n",
      "            #pragma unroll\n            for (int j = 0; j < kNi; ++j) {\n",
      "              #pragma unroll\n              for (int r = 0; r < 4; ++r) {\n",
      "                tile_out[(i * 16 + (lane >> 2) + (r >> 1) * 8) * 132 + warp_col + j * 8 + "
      "(lane & 3) * 2 + (r & 1)] = acc[i][j][r];\n",
      "              }\n            }\n          }\n        }\n        __syncthreads();\n",
      "        for (int e = threadIdx.x; e < kPassRows * 128; e += blockDim.x) {\n",
      "          const I m = m0 + pass * kPassRows + (e >> 7), n = n0 + (e & 127);\n",
      "          if (m >= M || n >= N) continue;\n",
      "          const I flat = (b * M + m) * N + n;\n", "          if (split.phase == 1) {\n",
      "            partials[(I)blockIdx.y * outputs + flat] =\n",
      "                tile_out[(e >> 7) * 132 + (e & 127)];\n",
      "            continue;\n          }\n",
      writer.epilogue(absl::StrCat("(", t, ")tile_out[(e >> 7) * 132 + (e & 127)]"), "flat"),
      "        }\n        __syncthreads();\n      }\n");
}

std::string tensor_core_matmul(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  const int ra = writer.rank(1), rb = writer.rank(2), batch = writer.rank(0) - 2;
  const bool bf16 = program.instrs[program.anchor_operands[0]].dtype == DType::BF16;
  const std::string to_16 = bf16 ? "f32_to_bf16" : "f32_to_f16";
  const jit::Instr* a_load = plain_load(program, 0);
  const jit::Instr* b_load = plain_load(program, 1);
  const bool b_k_contiguous = b_is_k_contiguous(program);
  // Two stages of the largest tiles (128 rows of A and B), in elements.
  const int stage_elements = 128 * kPaddedK + (b_k_contiguous ? 128 * kPaddedK : 32 * kPaddedN);
  std::string s = absl::StrCat(
      "  const I M = (I)a.shape[1][", ra - 2, "], N = (I)a.shape[2][", rb - 1,
      "], depth = (I)a.shape[1][", ra - 1, "];\n",
      "  // Split K (split.phase 1: launch_geometry splits a matmul with too few tiles to fill\n",
      "  // the GPU): block row blockIdx.y multiplies its chunk of the k-steps and writes the\n",
      "  // f32 partial tile to scratch; phase 2 sums the chunks in order and runs the epilogue.\n",
      "  const I all_steps = (depth + 31) / 32, outputs = ", writer.numel(0), ";\n",
      "  float* const partials = (float*)split.scratch;\n", "  const I chunk_steps =\n",
      "      split.phase == 1 ? (all_steps + (I)split.chunks - 1) / (I)split.chunks : all_steps;\n",
      "  const I first_step = split.phase == 1 ? (I)blockIdx.y * chunk_steps : (I)0;\n",
      "  const I left_steps = first_step < all_steps ? all_steps - first_step : (I)0;\n",
      "  const I steps = left_steps < chunk_steps ? left_steps : chunk_steps;  // this block's\n",
      "  if (split.phase == 2) {\n", "    const I threads = (I)gridDim.x * blockDim.x;\n",
      "    for (I flat = (I)blockIdx.x * blockDim.x + threadIdx.x; flat < outputs; flat += "
      "threads) {\n",
      "      float sum = 0.0f;\n",
      "      for (I c = 0; c < (I)split.chunks; ++c) sum += partials[c * outputs + flat];\n",
      writer.epilogue(absl::StrCat("(", register_type(program.anchor_dtype), ")sum"), "flat"),
      "    }\n    return;\n  }\n", "  // Two stages of A [rows][32 + 8] and B ",
      b_k_contiguous ? "[128][32 + 8]" : "[32][128 + 8]", "; then the epilogue's f32 tile.\n",
      "  __shared__ Pack<unsigned short, 8> smem_packs[", 2 * stage_elements / 8, "];\n",
      "  unsigned short* const smem = smem_packs[0].v;\n",
      "  const SharedAddress smem_address = shared_address(smem);  // what ldmatrix, cp.async "
      "take\n");
  // Which operands are copied by cp.async in this launch (the same for every tile).
  absl::StrAppend(
      &s,
      "  const bool a_async = ", a_load != nullptr ? async_condition(*a_load, ra, ra - 1) : "false",
      ";\n", "  const bool b_async = ",
      b_load != nullptr ? async_condition(*b_load, rb, b_k_contiguous ? rb - 2 : rb - 1) : "false",
      ";\n  (void)a_async; (void)b_async;\n");
  absl::StrAppend(
      &s, "  auto run_tiles = [&](auto rows) {\n",
      "    constexpr int kRows = decltype(rows)::value;\n",
      "    constexpr int kWarpsM = kRows == 128 ? 2 : 1, kWarpsN = 8 / kWarpsM;\n",
      "    constexpr int kMi = kRows / kWarpsM / 16, kNi = 16 / kWarpsN;  // mma tiles per warp\n",
      "    constexpr int kStage = kRows * 40 + ", b_k_contiguous ? "128 * 40" : "32 * 136",
      ";  // elements per buffer\n",
      "    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n",
      "    const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;\n",
      "    const int warp_row = warp_m * (kRows / kWarpsM), warp_col = warp_n * kNi * 8;\n",
      "    // The row this lane addresses in each ldmatrix.x4, at i = j = kk = 0: lane 8q + r "
      "gives\n",
      "    // row r of matrix q (the orders of the matrices are below, where they are loaded).\n",
      "    const int a_frag = (warp_row + (lane & 15)) * 40 + (lane >> 4) * 8;\n",
      b_k_contiguous ? "    const int b_frag = (warp_col + (lane & 7) + (lane >> 4) * 8) * 40 + "
                       "((lane >> 3) & 1) "
                       "* 8;\n"
                     : "    const int b_frag = (lane & 15) * 136 + warp_col + (lane >> 4) * 8;\n",
      "    const I tiles_m = (M + kRows - 1) / kRows, tiles_n = (N + 127) / 128;\n",
      "    const I tiles = M * N > 0 ? outputs / (M * N) * tiles_m * tiles_n : (I)0;\n",
      "    for (I tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n",
      "      const I b = tile / (tiles_m * tiles_n), rest = tile % (tiles_m * tiles_n);\n",
      "      const I m0 = rest / tiles_n * kRows, n0 = rest % tiles_n * 128;\n      ",
      writer.unravel(0, "out", "b * M * N"), "      I idx1[", writer.index_rank(),
      "] = {0};\n      I idx2[", writer.index_rank(), "] = {0};\n", batch_indices(writer, 1, batch),
      batch_indices(writer, 2, batch));
  if (a_load != nullptr) {  // the batch matrix's start, and its row stride
    absl::StrAppend(&s, "      const unsigned short* const a_src = (const unsigned short*)a.in[",
                    a_load->input, "] + ", writer.offset(a_load->view, 1, "idx1"), ";\n",
                    "      const I a_row_stride = (I)a.stride[", a_load->view, "][", ra - 2,
                    "];\n");
  }
  if (b_load != nullptr) {
    absl::StrAppend(&s, "      const unsigned short* const b_src = (const unsigned short*)a.in[",
                    b_load->input, "] + ", writer.offset(b_load->view, 2, "idx2"), ";\n",
                    "      const I b_row_stride = (I)a.stride[", b_load->view, "][",
                    b_k_contiguous ? rb - 1 : rb - 2, "];\n");
  }
  absl::StrAppend(&s, "      float acc[kMi][kNi][4] = {};\n",
                  "      for (I step = 0; step <= steps; ++step) {\n",
                  stage_k_step(writer, a_load != nullptr, b_load != nullptr, b_k_contiguous, to_16),
                  "        if (step == 0) continue;\n", multiply_k_step(b_k_contiguous, bf16),
                  "      }\n", tile_epilogue(writer), "    }\n  };\n",
                  "  if (M <= 16) run_tiles(Constant<16>{}); else run_tiles(Constant<128>{});\n");
  return s;
}

}  // namespace

bool matmul_uses_tensor_cores(const jit::KernelProgram& program) {
  if (program.anchor != AnchorKind::kMatmul || program.space_ranks[1] < 2 ||
      program.space_ranks[2] < 2)
    return false;
  const DType a = program.instrs[program.anchor_operands[0]].dtype,
              b = program.instrs[program.anchor_operands[1]].dtype;
  auto fp8 = [](DType dt) { return dt == DType::F8E4M3 || dt == DType::F8E5M2; };
  // 8-bit floats are staged as f16, which holds every e4m3 and e5m2 value exactly.
  return (a == b && (a == DType::F16 || a == DType::BF16)) || (fp8(a) && fp8(b));
}

bool matmul_is_tiled(const jit::KernelProgram& program) {
  if (matmul_uses_tensor_cores(program) || matmul_reads_quantized_weight(program)) return true;
  if (program.anchor != AnchorKind::kMatmul || program.space_ranks[1] < 2 ||
      program.space_ranks[2] < 2)
    return false;
  return program.instrs[program.anchor_operands[0]].dtype == DType::F32 &&
         program.instrs[program.anchor_operands[1]].dtype == DType::F32;
}

int64_t matmul_tile_count(const jit::KernelProgram& program, const jit::MatmulShape& mm) {
  if (matmul_reads_quantized_weight(program)) return quantized_matmul_tile_count(mm);
  if (!matmul_uses_tensor_cores(program)) {
    return mm.batches * ((mm.m + 63) / 64) * ((mm.n + 63) / 64);
  }
  const int64_t rows = mm.m <= 16 ? 16 : 128;  // as the kernel's run_tiles picks
  return mm.batches * ((mm.m + rows - 1) / rows) * ((mm.n + 127) / 128);
}

// Quantized (a block-quantized weight), tiled when matmul_is_tiled; otherwise one thread per
// output element: a dot product over the
// shared dimension.
std::string render_matmul(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  if (matmul_reads_quantized_weight(program)) return render_quantized_matmul(writer);
  if (matmul_uses_tensor_cores(program)) return tensor_core_matmul(writer);
  if (matmul_is_tiled(program)) return tiled_matmul_f32(writer);
  std::string s;
  const int ra = writer.rank(1), rb = writer.rank(2), r0 = writer.rank(0);
  const int batch = r0 - (ra > 1) - (rb > 1);
  const std::string t = register_type(program.anchor_dtype);
  absl::StrAppend(
      &s, "  const I total = ", writer.numel(0), ";\n  const I depth = (I)a.shape[1][", ra - 1,
      "];\n",
      "  for (I i = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * "
      "(I)blockDim.x) {\n    ",
      writer.unravel(0, "out", "i"), "    I idx1[", writer.index_rank(), "] = {0};\n    I idx2[",
      writer.index_rank(), "] = {0};\n");
  s += batch_indices(writer, 1, batch) + batch_indices(writer, 2, batch);
  if (ra > 1) absl::StrAppend(&s, "    idx1[", ra - 2, "] = out[", batch, "];\n");
  if (rb > 1) absl::StrAppend(&s, "    idx2[", rb - 1, "] = out[", r0 - 1, "];\n");
  const std::string acc = is_floating(program.anchor_dtype)
                              ? (program.anchor_dtype == DType::F64 ? "double" : "float")
                              : "i64";
  absl::StrAppend(
      &s, "    ", acc, " sum = 0;\n    for (I k = 0; k < depth; ++k) {\n      idx1[", ra - 1,
      "] = k;\n      idx2[", rb > 1 ? rb - 2 : 0, "] = k;\n", writer.space_code(1, "idx1"),
      writer.space_code(2, "idx2"), "      sum = ",
      is_floating(program.anchor_dtype)
          ? absl::StrCat("sum + v", program.anchor_operands[0], " * v", program.anchor_operands[1])
          : absl::StrCat("kiln::math::wrapping_add(sum, kiln::math::wrapping_mul(v",
                         program.anchor_operands[0], ", v", program.anchor_operands[1], "))"),
      ";\n    }\n", writer.epilogue(absl::StrCat("(", t, ")sum"), "i"), "  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
