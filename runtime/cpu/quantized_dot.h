// The integer core of the CPU's quantized matrix products (quantized_gemm.h): activations
// rounded to 8 bits in blocks of 32, and the tile kernels that multiply them with the 32-value
// chunks of a block-quantized weight, compiled once per instruction set (AVX-512 VNNI, AVX2,
// portable C++) and chosen at run time. Private to runtime/cpu.
//
// Every format is read as chunks of 32 values w = dw * q + mw (q an integer of at most 8
// bits, dw and mw floats; Q6_K's chunk has a second integer scale per 16 values), so a chunk
// times an activation block a = da * qa is dw * da * (q . qa) + mw * da * sum(qa): one 32-wide
// integer dot product and two float steps.
#ifndef KILN_RUNTIME_CPU_QUANTIZED_DOT_H_
#define KILN_RUNTIME_CPU_QUANTIZED_DOT_H_

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::runtime::cpu {

// 32 activations as da * q[i]: da = max |a| / 127, q rounded to nearest (|q| <= 127). One
// cache line each (the panels stream them). No default values: a product's blocks are
// allocated without zeroing, and quantize_activations writes every field (ActivationBlock{}
// is all zeros).
struct alignas(64) ActivationBlock {
  int8_t q[32];
  float d;                    // da
  float dsum;                 // da * sum(q), for the formats with a per-chunk minimum
  int32_t sum_low, sum_high;  // sum(q) over values 0-15 and 16-31
};

// Rounds a row of k values (k a multiple of 32) into k / 32 blocks: in AVX2 where the CPU has
// it, else portable C++ (the same bits; the vector code hands the portable loop the rare
// block of values below about 4e-37, and tests compare the two).
void quantize_activations(const float* a, int64_t k, ActivationBlock* out);
void quantize_activations_portable(const float* a, int64_t k, ActivationBlock* out);

// C[r][j] (r < rows, j < cols) = row r of `a` (k / 32 blocks each, rows `a_stride` blocks
// apart) times column j of the weight: k values of `format` from byte `w + j * w_stride`
// (starting at a block boundary), for any number of rows and columns.
struct DotTile {
  DType format;
  const ActivationBlock* a;
  int64_t a_stride;
  int rows;
  const uint8_t* w;
  int64_t w_stride;
  int cols;
  int64_t k;
  float* c;
  int64_t ldc;
};

using DotTileKernel = void (*)(const DotTile& tile);

// The same product for many rows, where the kernel has the instructions for it (AVX-512
// VNNI or AVX-VNNI): each chunk of up to PanelKernel::columns columns is first decoded into
// a panel of unsigned bytes laid out so that one vector holds 4 values of each column, then
// every row's activations are multiplied with it, 4 values broadcast at a time, lanes being
// columns (llama.cpp repacks its weights the same way for its GEMMs).
struct PanelTile {
  DotTile tile;    // cols <= PanelKernel::columns
  uint8_t* panel;  // scratch of PanelKernel::bytes(k) bytes, 64-byte aligned
  bool decoded;    // the panel holds tile's columns already (from a call with rows = 0)
  const float* bias = nullptr;  // tile.cols values added to each row's products, or null
};
struct PanelKernel {
  void (*run)(const PanelTile& tile) = nullptr;  // null where the CPU has no VNNI
  int columns = 0;                               // per panel: 16 (512-bit vectors) or 8
  // A panel's bytes: per chunk of 32 values, 32 bytes and 4 numbers of 4 bytes a column.
  int64_t bytes(int64_t k) const { return k / 32 * columns * 48; }
};
PanelKernel panel_kernel();  // for this CPU
// Each panel kernel by name, for tests; run is null where the CPU lacks its instructions.
PanelKernel panel_kernel_avx512_vnni();
PanelKernel panel_kernel_avx_vnni();

// The kernel for this CPU: AVX-512 VNNI (mostly 256-bit vectors), AVX-VNNI, AVX2, else
// portable C++.
DotTileKernel dot_tile_kernel();
// Each kernel by name, for tests that check one against another; null when the CPU (or the
// build) lacks its instructions.
DotTileKernel dot_tile_portable();
DotTileKernel dot_tile_avx2();
DotTileKernel dot_tile_avx512_vnni();
DotTileKernel dot_tile_avx_vnni();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_QUANTIZED_DOT_H_
