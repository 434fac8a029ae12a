// Matmuls whose weight is block-quantized (docs/quantization.md), read where it lies: the
// weight never becomes floats in memory, nor in shared memory. As on the CPU, each row of A
// is rounded to 8-bit blocks of 32 (llama.cpp's Q8_0 activations) and multiplied with the
// weight's integers by dp4a (four byte products per instruction), then scaled in f32.
//
// A block computes a tile of kRows rows by 32 columns (weight rows), over K in chunks of 256
// values (8 blocks of 32, or one super-block):
// - the weight's bytes for the tile's 32 columns are copied to shared memory by 16-byte
//   cp.async, double-buffered: chunk s + 1 is in flight while chunk s is multiplied. A
//   column's bytes need not start at 16 bytes; its copy starts at the 16-byte boundary below
//   and the decoder skips the difference.
// - A's chunk (through its prologue, whatever fused into it) is rounded to 8 bits in shared
//   memory: 8 threads per block of 32, with the block's max and sums by warp shuffles.
// - Each thread decodes one column's sub-blocks of 32 values into bytes (block_dot_* of
//   block_decoders.h) and runs them against 8 rows of activations.
//   kRows = 8 (M <= 8: decode steps, where the weight's bytes are all the time): warp w takes
//   sub-block w of each chunk for all 8 rows, and the 8 warps' sums meet in shared memory.
//   kRows = 64: warp w takes rows 8w .. 8w + 7 and every sub-block.
// With too few tiles to fill the GPU, launch_geometry splits K over gridDim.y, as for the
// tensor-core matmul (Split phases 1 and 2).
//
// Where the weight's view does not allow reading blocks in place (k not contiguous, a view
// that does not start at a block), the kernel computes each output as a dot product of A's
// values with the weight's values decoded one by one (block_decoders.h), in f32.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::AnchorKind;
using jit::KernelProgram;

namespace {

constexpr int kChunkValues = 256;  // the k-depth of one staged chunk
constexpr int kTileColumns = 32;   // weight rows per tile: a warp's lanes

// 16-byte units a column's chunk of bytes occupies in shared memory: its bytes, plus up to 14
// before them (a column starts at an even byte, copied from the 16-byte boundary below),
// rounded up to an odd count. The 32 lanes read the same field of 32 columns; with a slot of
// an odd number of units those reads spread over 8 banks (4 lanes to a bank), with an even
// number over 4 or fewer.
int slot_units(DType format) {
  const int64_t bytes = storage_bytes(format, kChunkValues);
  const int units = static_cast<int>((14 + bytes + 15) / 16);
  return units | 1;
}

// The plain load of the block-quantized weight that operand B is, or null.
const jit::Instr* quantized_weight_load(const KernelProgram& program) {
  const jit::Instr& in = program.instrs[program.anchor_operands[1]];
  if (in.kind != jit::InstrKind::kLoad || !is_block_quantized(program.input_dtypes[in.input])) {
    return nullptr;
  }
  return &in;
}

// Declares idx1 set to row `row` of A (the output's flat rows: batch dims, then m) with k
// still to set, for A of rank ra in an output of rank r0.
std::string row_index(const KernelWriter& writer, const std::string& row) {
  const int ra = writer.rank(1), r0 = writer.rank(0);
  std::string s = absl::StrCat("I idx1[", writer.index_rank(), "] = {0};\n");
  if (ra < 2) return s;
  absl::StrAppend(&s, "{ ", writer.unravel(0, "out", absl::StrCat("(", row, ") * N")));
  for (int j = 0; j < ra - 2; ++j) {
    absl::StrAppend(&s, "  idx1[", j, "] = a.shape[1][", j, "] == 1 ? 0 : out[",
                    jit::matmul_batch_dim(ra, r0 - 2, j), "];\n");
  }
  absl::StrAppend(&s, "  idx1[", ra - 2, "] = out[", r0 - 2, "]; }\n");
  return s;
}

// The value of A at row `row` (idx1 set by row_index) and depth `k`, as a float.
std::string a_value(const KernelWriter& writer, const std::string& k, const std::string& target) {
  const KernelProgram& program = writer.program();
  return absl::StrCat("{\n  idx1[", writer.rank(1) - 1, "] = ", k, ";\n",
                      writer.space_code(1, "idx1"), "  ", target, " = (float)v",
                      program.anchor_operands[0], ";\n}\n");
}

// Phase 2 of a split launch: each output's chunks summed in order, then the epilogue.
std::string split_phase_two(const KernelWriter& writer) {
  return absl::StrCat(
      "  if (split.phase == 2) {\n", "    const I threads = (I)gridDim.x * blockDim.x;\n",
      "    for (I flat = (I)blockIdx.x * blockDim.x + threadIdx.x; flat < outputs; flat += "
      "threads) {\n",
      "      float sum = 0.0f;\n",
      "      for (I c = 0; c < (I)split.chunks; ++c) sum += partials[c * outputs + flat];\n",
      writer.epilogue("sum", "flat"), "    }\n    return;\n  }\n");
}

// One output's value `value` at row `row`, column `n`: a partial sum in phase 1, else the
// epilogue.
std::string store_output(const KernelWriter& writer, const std::string& value) {
  return absl::StrCat("          const I flat = row * N + n;\n",
                      "          if (split.phase == 1) {\n",
                      "            partials[(I)blockIdx.y * outputs + flat] = ", value, ";\n",
                      "          } else {\n", writer.epilogue(value, "flat"), "          }\n");
}

// The portable path: a thread per output, the weight decoded value by value.
std::string decoded_products(const KernelWriter& writer) {
  const int rb = writer.rank(2);
  return absl::StrCat(
      "  if (!in_place) {\n",
      "    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < outputs; e += "
      "(I)gridDim.x * blockDim.x) {\n",
      "      const I row = e / N, n = e % N;\n      ", row_index(writer, "row"), "      I idx2[",
      writer.index_rank(), "] = {0};\n      idx2[", rb - 1, "] = n;\n", "      float sum = 0.0f;\n",
      "      for (I k = k_begin; k < k_end; ++k) {\n", "        float x;\n",
      a_value(writer, "k", "x"), "        idx2[", rb - 2, "] = k;\n", writer.space_code(2, "idx2"),
      "        sum = sum + x * v", writer.program().anchor_operands[1], ";\n      }\n",
      store_output(writer, "sum"), "    }\n    return;\n  }\n");
}

// A's chunk at k0 for the tile's rows, rounded to 8-bit blocks of 32 in shared memory: 8
// threads per block, 4 values each (64 * kRows work items, a multiple of the 256 threads,
// so every warp's lanes all take part in the shuffles).
std::string quantize_activations(const KernelWriter& writer) {
  return absl::StrCat(
      "        for (int e = threadIdx.x; e < kRows * 64; e += blockDim.x) {\n",
      "          const int r = e >> 6, j = (e >> 3) & 7, quarter = e & 7;\n",
      "          const I row = r0 + r;\n", "          float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n",
      "          if (row < R && 32 * j < chunk_values) {\n            ", row_index(writer, "row"),
      "            for (int t = 0; t < 4; ++t) {\n",
      a_value(writer, "k0 + 32 * j + 4 * quarter + t", "x[t]"), "            }\n          }\n",
      "          // The block's largest magnitude, and NaN if any value is NaN or infinite.\n",
      "          float amax = 0.0f, probe = 0.0f;\n",
      "          for (int t = 0; t < 4; ++t) { amax = fmaxf(amax, fabsf(x[t])); probe = probe + "
      "x[t] * 0.0f; }\n",
      "          for (int o = 1; o < 8; o <<= 1) {\n",
      "            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));\n",
      "            probe = probe + __shfl_xor_sync(0xffffffffu, probe, o);\n          }\n",
      "          // As the CPU rounds (quantize_activations_portable): d = max / 127, nearest "
      "even.\n",
      "          const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;\n",
      "          const bool tiny = inverse > 3.402823466e38f;  // d subnormal: 1 / d overflows\n",
      "          unsigned word = 0;\n          int sum = 0;\n",
      "          for (int t = 0; t < 4; ++t) {\n",
      "            const float scaled = tiny ? x[t] / amax * 127.0f : x[t] * inverse;\n",
      "            int q = scaled == scaled ? (int)rintf(scaled) : 0;  // NaN: the scale is NaN\n",
      "            q = q > 127 ? 127 : q < -127 ? -127 : q;\n",
      "            word |= (unsigned)(q & 0xFF) << (8 * t);\n            sum += q;\n          }\n",
      "          for (int o = 1; o < 4; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);\n",
      "          ((unsigned*)a_words)[r * 64 + 8 * j + quarter] = word;\n",
      "          if ((quarter & 3) == 0) a_sums[r * 16 + 2 * j + (quarter >> 2)] = sum;\n",
      "          if (quarter == 0) a_scales[r * 8 + j] = probe != 0.0f ? "
      "__int_as_float(0x7fc00000) "
      ": d;\n",
      "        }\n");
}

// The copies of the tile's 32 columns of chunk `step` into buffer `step & 1`, by cp.async.
std::string stage_weight_chunk() {
  return absl::StrCat(
      "      auto stage_weights = [&](I step) {\n", "        const I k0 = (first_step + step) * ",
      kChunkValues, ";\n", "        const long long bytes =\n",
      "            (long long)(depth - k0 < ", kChunkValues, " ? depth - k0 : (I)", kChunkValues,
      ") / kBlockValues * kBlockBytes;\n", "        for (int c = threadIdx.x; c < ", kTileColumns,
      " * kSlotUnits; c += blockDim.x) {\n",
      "          const int col = c / kSlotUnits, unit = c % kSlotUnits;\n",
      "          const I n = n0 + col;\n          if (n >= N) continue;\n",
      "          const unsigned long long start = column_start(n, k0);\n",
      "          const long long left = (long long)(start & 15) + bytes - unit * 16;\n",
      "          if (left <= 0) continue;\n",
      "          cp_async_16(w_shared + (unsigned)((((int)(step & 1) * ", kTileColumns,
      " + col) * kSlotUnits + unit) * 16),\n",
      "                      weight + (start & ~15ull) + unit * 16, left >= 16 ? 16 : "
      "(int)left);\n",
      "        }\n        cp_async_commit();\n      };\n");
}

// One chunk's products: this thread's column and 8 rows, over its sub-blocks.
std::string multiply_chunk(DType format) {
  return absl::StrCat(
      "        const I n = n0 + lane;\n", "        if (n < N) {\n",
      "          const unsigned char* const chunk = (const unsigned char*)w_stage + ((int)(step & "
      "1) * ",
      kTileColumns, " + lane) * kSlotUnits * 16 + (int)(column_start(n, k0) & 15);\n",
      "          const int first_row = kRows == 8 ? 0 : 8 * warp;\n",
      "          const I rows_left = R - r0 - first_row;\n",
      "          const int live = rows_left < 8 ? (int)rows_left : 8;  // rows of A here\n",
      "          for (int j = kRows == 8 ? warp : 0; j < (kRows == 8 ? warp + 1 : 8); ++j) {\n",
      "            if (32 * j >= chunk_values) break;\n",
      "            const BlockDot b = block_dot_", dtype_name(format), "(chunk, j);\n",
      "            #pragma unroll\n            for (int i = 0; i < 8; ++i) {\n",
      "              if (i >= live) break;\n", "              const int r = first_row + i;\n",
      "              const Pack<unsigned, 4> q0 = a_words[r * 16 + 2 * j], q1 = a_words[r * 16 + 2 "
      "* j + 1];\n",
      "              const unsigned q[8] = {q0.v[0], q0.v[1], q0.v[2], q0.v[3], q1.v[0], q1.v[1], "
      "q1.v[2], q1.v[3]};\n",
      "              acc[i] += block_dot_row(b, q, a_scales[r * 8 + j], a_sums[r * 16 + 2 * j], "
      "a_sums[r * 16 + 2 * j + 1]);\n",
      "            }\n          }\n        }\n");
}

// The tile's outputs: with kRows = 8 the warps' sums (one sub-block each) meet in shared
// memory, in warp order; with 64 each thread holds its own.
std::string tile_outputs(const KernelWriter& writer) {
  return absl::StrCat(
      "      if (kRows == 8) {\n", "        float* const sums = (float*)a_words;  // [8][8][32]\n",
      "        for (int i = 0; i < 8; ++i) sums[(warp * 8 + i) * 32 + lane] = acc[i];\n",
      "        __syncthreads();\n", "        {\n", "          const int i = threadIdx.x >> 5;\n",
      "          const I row = r0 + i, n = n0 + lane;\n", "          float total = 0.0f;\n",
      "          for (int w = 0; w < 8; ++w) total += sums[(w * 8 + i) * 32 + lane];\n",
      "          if (row < R && n < N) {\n", store_output(writer, "total"), "          }\n",
      "        }\n        __syncthreads();  // before the next tile's activations overwrite sums\n",
      "      } else {\n", "        for (int i = 0; i < 8; ++i) {\n",
      "          const I row = r0 + 8 * warp + i, n = n0 + lane;\n",
      "          if (row < R && n < N) {\n", store_output(writer, "acc[i]"), "          }\n",
      "        }\n      }\n");
}

}  // namespace

bool matmul_reads_quantized_weight(const jit::KernelProgram& program) {
  if (program.anchor != AnchorKind::kMatmul || program.space_ranks[2] != 2 ||
      program.anchor_dtype != DType::F32 || quantized_weight_load(program) == nullptr) {
    return false;
  }
  return program.instrs[program.anchor_operands[0]].dtype == DType::F32;
}

int64_t quantized_matmul_tile_count(const jit::MatmulShape& mm) {
  const int64_t rows = mm.batches * mm.m, tile_rows = rows <= 8 ? 8 : 64;
  return ((rows + tile_rows - 1) / tile_rows) * ((mm.n + kTileColumns - 1) / kTileColumns);
}

std::string render_quantized_matmul(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  const jit::Instr& w = *quantized_weight_load(program);
  const DType format = program.input_dtypes[w.input];
  const int ra = writer.rank(1), rb = writer.rank(2);
  const int64_t values = block_values(format);
  const int view = w.view;
  std::string s = absl::StrCat(
      "  // The weight: ", dtype_name(format), ", blocks of ", values, " values in ",
      storage_bytes(format, values), " bytes.\n", "  constexpr int kBlockValues = ", values,
      ", kBlockBytes = ", storage_bytes(format, values), ", kSlotUnits = ", slot_units(format),
      ";\n", "  const I N = (I)a.shape[2][", rb - 1, "], depth = (I)a.shape[1][", ra - 1, "];\n",
      "  const I outputs = ", writer.numel(0),
      ", R = N > 0 ? outputs / N : (I)0;  // output rows\n",
      "  // Split K (phase 1: block row blockIdx.y takes its chunk of the 256-deep steps and\n",
      "  // writes f32 partial sums; phase 2 adds the chunks in order and runs the epilogue).\n",
      "  const I all_steps = (depth + ", kChunkValues - 1, ") / ", kChunkValues, ";\n",
      "  float* const partials = (float*)split.scratch;\n", "  const I chunk_steps =\n",
      "      split.phase == 1 ? (all_steps + (I)split.chunks - 1) / (I)split.chunks : all_steps;\n",
      "  const I first_step = split.phase == 1 ? (I)blockIdx.y * chunk_steps : (I)0;\n",
      "  const I left_steps = first_step < all_steps ? all_steps - first_step : (I)0;\n",
      "  const I steps = left_steps < chunk_steps ? left_steps : chunk_steps;\n",
      "  const I k_begin = first_step * ", kChunkValues, ", k_stop = k_begin + steps * ",
      kChunkValues, ";\n  const I k_end = k_stop < depth ? k_stop : depth;\n",
      split_phase_two(writer),
      "  // Blocks read in place: k contiguous and whole blocks (a view of the transposed weight\n",
      "  // may cut k), columns and the view's start on block boundaries, the buffer 16-byte\n",
      "  // aligned (cp.async).\n",
      "  const bool in_place = depth % kBlockValues == 0 && (depth == 0 || a.stride[", view,
      "][0] == 1) && a.stride[", view, "][1] % kBlockValues == 0 && a.offset[", view,
      "] % kBlockValues == 0 && ((unsigned long long)a.in[", w.input, "] & 15) == 0;\n",
      decoded_products(writer), "  const unsigned char* const weight = (const unsigned char*)a.in[",
      w.input, "];\n",
      "  // Byte offset of column n's chunk at depth k0 (a multiple of 256 values).\n",
      "  auto column_start = [&](I n, I k0) {\n", "    return (unsigned long long)((a.offset[",
      view, "] + (long long)n * a.stride[", view,
      "][1] + k0) / kBlockValues) * kBlockBytes;\n  };\n",
      "  // Two chunks of 32 weight columns; one chunk of A rounded to bytes (64 rows at most):\n",
      "  // words [rows][64], scales [rows][8], sums of each half block [rows][16].\n",
      "  __shared__ Pack<unsigned char, 16> w_stage[2 * ", kTileColumns, " * kSlotUnits];\n",
      "  __shared__ Pack<unsigned, 4> a_words[64 * 16];\n",
      "  __shared__ float a_scales[64 * 8];\n", "  __shared__ int a_sums[64 * 16];\n",
      "  const SharedAddress w_shared = shared_address(w_stage);\n",
      "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n",
      "  auto run_tiles = [&](auto rows) {\n", "    constexpr int kRows = decltype(rows)::value;\n",
      "    const I tiles_n = (N + ", kTileColumns - 1, ") / ", kTileColumns,
      ", tiles = (R + kRows - 1) / kRows * tiles_n;\n",
      "    for (I tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n",
      "      const I r0 = tile / tiles_n * kRows, n0 = tile % tiles_n * ", kTileColumns, ";\n",
      stage_weight_chunk(), "      float acc[8] = {};\n",
      "      if (steps > 0) stage_weights(0);\n",
      "      for (I step = 0; step < steps; ++step) {\n",
      "        if (step + 1 < steps) stage_weights(step + 1); else cp_async_commit();\n",
      "        const I k0 = (first_step + step) * ", kChunkValues, ";\n",
      "        const int chunk_values = (int)(depth - k0 < ", kChunkValues, " ? depth - k0 : (I)",
      kChunkValues, ");\n", quantize_activations(writer),
      "        cp_async_wait<1>();  // this thread's copies of this chunk have landed\n",
      "        __syncthreads();     // and everyone's, and the activations\n",
      multiply_chunk(format),
      "        __syncthreads();  // everyone is done with this buffer before it is restaged\n",
      "      }\n", tile_outputs(writer), "    }\n  };\n",
      "  if (R <= 8) run_tiles(Constant<8>{}); else run_tiles(Constant<64>{});\n");
  return s;
}

}  // namespace kiln::runtime::cuda
