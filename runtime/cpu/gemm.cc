// The f32 GEMM core, blocked as in BLIS/GotoBLAS and compiled once per instruction set by
// hwy/foreach_target.h; HWY_DYNAMIC_DISPATCH picks the best one the CPU has.
//
// - B is packed into panels of kPanel = 2 vectors of columns, k-major, so the inner kernel
//   reads it with unit-stride loads whatever B's strides were (a PyTorch-layout
//   weight costs the same as a pre-transposed one). A weight seen twice keeps its packed
//   form (packed_weight_cache.h), in 2 MiB pages where the OS grants them
//   (huge_page_allocator.h): streaming a model's weights then misses the TLB 512 times
//   less often (a MiniLM forward at 8 × 64 took 3.5% less time).
// - A with contiguous rows is read in place; any other A is packed once per call into
//   strips of kRows rows, k-major.
// - The work is split into tasks of row_block_rows() rows × a run of panels, on all cores. Per
//   task and per kDepth slice of k, the task's A strips stay in L2 while each panel's slice
//   (kDepth × kPanel floats: 24 KiB with AVX2, 48 KiB with AVX-512) is read from L1 or L2.
//   A k of 384 (MiniLM's hidden size) is one slice: at m = 512 and 4096 that measured 5-8%
//   faster than slices of 256, whose C tiles are stored and read back once more.
// - The inner kernel keeps a kRows × kPanel tile of C in vector registers (12 rows, 24
//   registers, with AVX-512's 32; 6 rows, 12 registers, with AVX2's 16) and does 2 FMAs
//   per broadcast A element.
// - gemm.h's GemmEpilogue: a bias row is added as the last slice's tiles are stored, and the
//   caller's elementwise steps (an activation, a residual add) run over each task's block
//   of C once it is finished (still in that core's L2), so a linear layer's epilogue needs
//   no pass of its own.
// - Every C element sums its k products in order within a slice and the slices in order,
//   so the result depends only on m, n and k, not on strides, threads or the cache.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/cpu/gemm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "base/thread_pool.h"
#include "hwy/highway.h"
#include "kiln/dtype.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/packed_weight_cache.h"
#include "runtime/cpu/scratch.h"

#ifndef KILN_GEMM_ROW_TILE_FOR_TEST_
#define KILN_GEMM_ROW_TILE_FOR_TEST_
namespace kiln::runtime::cpu {
// set_gemm_row_tile_for_test's value (0: chosen by CPU); defined once, before the first
// target's code (this file is compiled once per target).
inline std::atomic<int> row_tile_for_test{0};
}  // namespace kiln::runtime::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace kiln::runtime::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows of C per inner-kernel tile (kRows, a template parameter below): the C tile (kRows ×
// 2 vectors) lives in registers beside the two B vectors and an A broadcast. AVX-512's 32
// registers hold 12 rows (24 accumulators), which halves the B panel read per FMA against 6
// rows; AVX2's and SSE's 16 hold 6 (12 accumulators). 12 rows are taken on Intel cores with
// AVX-512 (two full 512-bit FMA units): on a 2-core Xeon they took MiniLM's linears from
// 9-13% behind ONNX Runtime's MLAS to level with it at k = 384 (bench/RESULTS.md,
// 2026-12-05). AMD's Zen 4 runs 512-bit FMAs in 256-bit halves, and 12 rows
// measured slower there (docs/cpu_gemm.md; that was before the group pointers of
// tile_kernel, when the compiler spilled row pointers, and was not measured again), so AMD
// cores keep 6.

// Whether this target has the registers for 12-row tiles, and whether to use them here.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr bool kHasTwelveRowTiles = true;
bool twelve_row_tiles() {
  if (const int forced = row_tile_for_test.load(std::memory_order_relaxed)) return forced == 12;
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
}
#else
constexpr bool kHasTwelveRowTiles = false;
bool twelve_row_tiles() { return false; }
#endif
constexpr int64_t kDepth = 384;  // the k slice an A block and a panel slice cover
constexpr int64_t kTasksPerCore = 4;

// Rows of C per task at most (a multiple of 6 and 12): as many as let the task's A block
// (rows × kDepth floats) take half of this core's L2, from 72 to 264. Every row block
// streams all of B through the core once per depth slice, and a model's weights come from
// memory, not from cache: on a 2-core Xeon (2 MiB L2) blocks of 264 rows instead of 72
// made a MiniLM forward at 8 × 64 4% faster (each core reads B once at m = 512, not four
// times), though with one weight reused in cache the two measured the same.
int64_t row_block_rows() {
  static const int64_t rows = [] {
    const auto l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // 0 or -1 where the OS does not say
    const int64_t fit = l2 > 0 ? l2 / 2 / (kDepth * int64_t{sizeof(float)}) / 12 * 12 : 0;
    return std::clamp<int64_t>(fit, 72, 264);
  }();
  return rows;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Columns per panel: two vectors.
int64_t panel_width() { return static_cast<int64_t>(2 * hn::Lanes(hn::ScalableTag<float>())); }

// Element e of a matrix stored as E, as f32 (16-bit types widen exactly).
template <class E>
HWY_INLINE float widen(const E* data, int64_t e) {
  if constexpr (std::is_same_v<E, float>) {
    return data[e];
  } else {
    return static_cast<float>(data[e]);
  }
}

// Calls f with the operand's data as a typed pointer: const float*, const BFloat16* or
// const Half*.
template <class F>
void with_elements(const GemmOperand& x, F&& f) {
  switch (x.element) {
    case GemmElement::kF32:
      return f(static_cast<const float*>(x.data));
    case GemmElement::kBF16:
      return f(static_cast<const BFloat16*>(x.data));
    case GemmElement::kF16:
      return f(static_cast<const Half*>(x.data));
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// dst row t (16 floats, row stride ldd) = column t of the 16 × 16 block at src (row stride
// ld): unpacks of 32- and 64-bit pairs, then two rounds of 128-bit lane shuffles.
HWY_INLINE void transpose_16x16(const float* src, int64_t ld, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  auto pd = [](__m512 v) { return _mm512_castps_pd(v); };
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[i]), pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[i]), pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[i + 1]), pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[i + 1]), pd(t[i + 3])));
  }
  for (int i = 0; i < 16; i += 8) {
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    _mm512_storeu_ps(dst + j * ldd, _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88));
    _mm512_storeu_ps(dst + (j + 8) * ldd, _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd));
  }
}
#endif

// Packs panels [p0, p1) of B: panel p holds columns [p * w, p * w + w) for every k, k-major,
// zero past column n, widened to f32.
template <class E>
void pack_b_panels(const E* data, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
                   int64_t p0, int64_t p1, float* packed) {
  const int64_t w = panel_width();
  for (int64_t p = p0; p < p1; ++p) {
    float* dst = packed + p * k * w;
    const int64_t j0 = p * w, cols = std::min(w, n - j0);
    if (cols < w) std::fill_n(dst, k * w, 0.0f);
    if (col_stride == 1 && cols == w) {
      for (int64_t kk = 0; kk < k; ++kk) {
        const E* src = data + kk * row_stride + j0;
        if constexpr (std::is_same_v<E, float>) {
          std::memcpy(dst + kk * w, src, w * sizeof(float));
        } else {
          for (int64_t j = 0; j < w; ++j) dst[kk * w + j] = widen(src, j);
        }
      }
      continue;
    }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // A transposed f32 B whose columns are contiguous (attention's Kᵀ: K's rows) in 16 × 16
    // blocks transposed in registers: element by element, packing Kᵀ was 1.9% of a MiniLM
    // forward at 8 × 64, more than the online softmax.
    if constexpr (std::is_same_v<E, float>) {
      if (row_stride == 1 && cols == w && w == 32) {
        const int64_t whole = k / 16 * 16;
        for (int64_t half = 0; half < 2; ++half) {
          const float* column = data + (j0 + 16 * half) * col_stride;
          for (int64_t kk = 0; kk < whole; kk += 16) {
            transpose_16x16(column + kk, col_stride, dst + kk * w + 16 * half, w);
          }
        }
        for (int64_t kk = whole; kk < k; ++kk) {
          for (int64_t j = 0; j < w; ++j) dst[kk * w + j] = data[kk + (j0 + j) * col_stride];
        }
        continue;
      }
    }
#endif
    // Any other layout (a transposed B, such as attention's Kᵀ) depth by depth: the first
    // pass touches every column's start at once, so their cache misses overlap (column by
    // column, a fresh K's misses were a fifth of attention's time: perf, MiniLM 8 x 64).
    for (int64_t kk = 0; kk < k; ++kk) {
      const E* src = data + kk * row_stride + j0 * col_stride;
      for (int64_t j = 0; j < cols; ++j) dst[kk * w + j] = widen(src, j * col_stride);
    }
  }
}

// Packs strips [s0, s1) of A, kRows rows each, k-major over all of k, widened to f32: strip
// s, depth d, row r at [s * k * kRows + d * kRows + r]; rows past m stay unset (the kernel
// never reads them).
template <int64_t kRows, class E>
void pack_a_strips(const E* data, int64_t row_stride, int64_t col_stride, int64_t m, int64_t k,
                   int64_t s0, int64_t s1, float* packed) {
  for (int64_t s = s0; s < s1; ++s) {
    float* dst = packed + s * k * kRows;
    const int64_t strip_rows = std::min(kRows, m - s * kRows);
    const E* src = data + s * kRows * row_stride;
    if (col_stride == 1 && strip_rows == kRows) {  // the strip's rows read side by side
      for (int64_t d = 0; d < k; ++d) {
        for (int64_t r = 0; r < kRows; ++r) dst[d * kRows + r] = widen(src, r * row_stride + d);
      }
      continue;
    }
    for (int64_t r = 0; r < strip_rows; ++r) {
      for (int64_t d = 0; d < k; ++d) {
        dst[d * kRows + r] = widen(src, r * row_stride + d * col_stride);
      }
    }
  }
}

// Stores a C row of a partial panel (the matrix's last `cols` < 2 vectors of columns), as
// the full store would: (accumulate ? row : 0) + v, then + bias. Through a stack copy sized
// for this target and bounded by what was stored (so the compiler sees every element read
// was written); out of line, as it runs once per row of the last panel only.
template <class D, class V>
HWY_NOINLINE void store_partial_row(D d, float* HWY_RESTRICT row, V v0, V v1, int64_t cols,
                                    bool accumulate, const float* HWY_RESTRICT bias) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float spill[2 * HWY_LANES(float)];
  hn::Store(v0, d, spill);
  hn::Store(v1, d, spill + lanes);
  const int64_t stored = std::min(cols, 2 * lanes);
  for (int64_t j = 0; j < stored; ++j) {
    const float v = accumulate ? row[j] + spill[j] : spill[j];
    row[j] = bias != nullptr ? v + bias[j] : v;
  }
}

// C tile (R rows × `cols` ≤ panel width) = (accumulate ? C tile : 0) + A strip · B panel
// slice, over `depth` packed steps, plus bias[j] in column j when `bias` is set (the last
// slice of a product with a bias row).
// A is read packed (row i, depth p at a[p * kRows + i], from pack_a_strips) or in place
// (at a[i * lda + p], when its rows are contiguous: packing them would copy A for nothing).
template <int64_t kRows, int R, bool kInPlaceA>
HWY_INLINE void tile_kernel(int64_t depth, const float* HWY_RESTRICT a, int64_t lda,
                            const float* HWY_RESTRICT pb, float* HWY_RESTRICT c, int64_t ldc,
                            int64_t cols, bool accumulate, const float* HWY_RESTRICT bias) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  using V = hn::Vec<decltype(d)>;
  // In place, rows are reached from four group pointers (rows 3g, 3g + 1, 3g + 2 at offsets
  // 0, lda and 2·lda, which x86 addresses as base + lda·4 and base + lda·8) that advance one
  // float per step: a pointer per row would need more general registers than there are, and
  // the compiler spilled them (a reload per broadcast, perf of MiniLM's 512 × 1536 × 384).
  const float* a_group[4];
  for (int g = 0; g < 4; ++g) a_group[g] = kInPlaceA ? a + 3 * g * lda : a + 3 * g;
  constexpr int64_t kStep = kInPlaceA ? 1 : kRows;
  const int64_t row_step = kInPlaceA ? lda : 1;
  V c00 = hn::Zero(d), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  V c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  V c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;
  V c90 = c00, c91 = c00, c100 = c00, c101 = c00, c110 = c00, c111 = c00;
  // B is fetched kPrefetchSteps steps (6 KiB with AVX-512) ahead of its use: a model's
  // weights come from memory, and the hardware's streamer, which starts afresh in every
  // 4 KiB page, left the first tile of each panel waiting (MiniLM at 1 × 16 reads 42 MB of
  // weights per forward; the prefetch took it 6% faster, 8 × 64 2%). Past the panel it
  // fetches the next one's start, which comes next; prefetches never fault.
  constexpr int64_t kPrefetchSteps = 48;
#pragma GCC unroll 4
  for (int64_t p = 0; p < depth; ++p) {
    __builtin_prefetch(pb + kPrefetchSteps * 2 * lanes, 0, 3);
    __builtin_prefetch(pb + kPrefetchSteps * 2 * lanes + lanes, 0, 3);
    const V b0 = hn::LoadU(d, pb), b1 = hn::LoadU(d, pb + lanes);
#define KILN_GEMM_ROW(i)                                              \
  if constexpr (R > i) {                                              \
    const V a_value = hn::Set(d, a_group[i / 3][(i % 3) * row_step]); \
    c##i##0 = hn::MulAdd(a_value, b0, c##i##0);                       \
    c##i##1 = hn::MulAdd(a_value, b1, c##i##1);                       \
  }
    KILN_GEMM_ROW(0)
    KILN_GEMM_ROW(1)
    KILN_GEMM_ROW(2)
    KILN_GEMM_ROW(3)
    KILN_GEMM_ROW(4)
    KILN_GEMM_ROW(5)
    KILN_GEMM_ROW(6)
    KILN_GEMM_ROW(7)
    KILN_GEMM_ROW(8)
    KILN_GEMM_ROW(9)
    KILN_GEMM_ROW(10)
    KILN_GEMM_ROW(11)
#undef KILN_GEMM_ROW
    pb += 2 * lanes;
    for (const float*& group : a_group) group += kStep;
  }
  const bool full = cols == 2 * lanes;
  const V bias0 = bias != nullptr && full ? hn::LoadU(d, bias) : hn::Zero(d);
  const V bias1 = bias != nullptr && full ? hn::LoadU(d, bias + lanes) : hn::Zero(d);
  // Inlined on purpose: as an out-of-line call per row, the store took 8% of a GEMM's
  // samples (perf, gemm_bench m = 512).
  auto store_row = [&](float* row, V v0, V v1) __attribute__((always_inline)) HWY_ATTR {
    if (!full) return store_partial_row(d, row, v0, v1, cols, accumulate, bias);
    if (accumulate) {
      v0 = hn::Add(hn::LoadU(d, row), v0);
      v1 = hn::Add(hn::LoadU(d, row + lanes), v1);
    }
    if (bias != nullptr) {
      v0 = hn::Add(v0, bias0);
      v1 = hn::Add(v1, bias1);
    }
    hn::StoreU(v0, d, row);
    hn::StoreU(v1, d, row + lanes);
  };
  if constexpr (R > 0) store_row(c, c00, c01);
  if constexpr (R > 1) store_row(c + ldc, c10, c11);
  if constexpr (R > 2) store_row(c + 2 * ldc, c20, c21);
  if constexpr (R > 3) store_row(c + 3 * ldc, c30, c31);
  if constexpr (R > 4) store_row(c + 4 * ldc, c40, c41);
  if constexpr (R > 5) store_row(c + 5 * ldc, c50, c51);
  if constexpr (R > 6) store_row(c + 6 * ldc, c60, c61);
  if constexpr (R > 7) store_row(c + 7 * ldc, c70, c71);
  if constexpr (R > 8) store_row(c + 8 * ldc, c80, c81);
  if constexpr (R > 9) store_row(c + 9 * ldc, c90, c91);
  if constexpr (R > 10) store_row(c + 10 * ldc, c100, c101);
  if constexpr (R > 11) store_row(c + 11 * ldc, c110, c111);
}

// Dispatches a tile of `rows` <= kRows rows to the kernel compiled for that many (the
// last strip of a matrix may be short).
template <int64_t kRows, bool kInPlaceA, int R = kRows>
void run_tile(int64_t rows, int64_t depth, const float* a, int64_t lda, const float* pb, float* c,
              int64_t ldc, int64_t cols, bool accumulate, const float* bias) {
  if constexpr (R > 1) {
    if (rows < R) {
      return run_tile<kRows, kInPlaceA, R - 1>(rows, depth, a, lda, pb, c, ldc, cols, accumulate,
                                               bias);
    }
  }
  tile_kernel<kRows, R, kInPlaceA>(depth, a, lda, pb, c, ldc, cols, accumulate, bias);
}

int64_t PanelWidthImpl() { return panel_width(); }
int64_t RowTileImpl() { return twelve_row_tiles() ? 12 : 6; }

// Packs all of B into `packed` (panels × k × panel width floats), on all cores.
void PackImpl(int64_t k, int64_t n, const GemmOperand& b, float* packed) {
  if (k == 0 || n == 0) return;  // nothing to read: an empty B may have no data pointer
  const int64_t w = panel_width(), panels = ceil_div(n, w);
  with_elements(b, [&](const auto* data) {
    base::parallel_for(panels, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k * w)),
                       [&](int64_t p0, int64_t p1) {
                         pack_b_panels(data, b.row_stride, b.col_stride, k, n, p0, p1, packed);
                       });
  });
}

// C = A · B, then `epilogue`, with B packed by PackImpl, in tiles of kRows rows.
template <int64_t kRows>
void gemm_in_tiles(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const float* bp, float* c,
                   int64_t ldc, const GemmEpilogue& epilogue) {
  if (m == 0 || n == 0) return;
  const float* bias = epilogue.bias;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      if (bias != nullptr) {
        std::copy_n(bias, n, c + i * ldc);
      } else {
        std::fill_n(c + i * ldc, n, 0.0f);
      }
      if (epilogue.finish) epilogue.finish(c + i * ldc, i, 0, n);
    }
    return;
  }
  const int64_t w = panel_width(), panels = ceil_div(n, w);
  const int64_t strips = ceil_div(m, kRows);
  // Tasks: row blocks × runs of panels, about kTasksPerCore per core. parallel_for gives each
  // core one contiguous range of tasks, so the cores stay even only if the tasks do: block b
  // holds strips [b * strips / row_blocks, (b + 1) * strips / row_blocks), and when there
  // are several blocks their count is a multiple of the cores (m = 512 in blocks of 72 rows
  // was 7 × 72 + 8 rows: one core did 30% more than the other).
  const int64_t workers = base::worker_count();
  int64_t row_blocks = ceil_div(strips, row_block_rows() / kRows);
  if (row_blocks > 1) row_blocks = std::min(strips, ceil_div(row_blocks, workers) * workers);
  auto block_start = [&](int64_t b) { return std::min(m, b * strips / row_blocks * kRows); };
  const int64_t wanted = ceil_div(kTasksPerCore * workers, row_blocks);
  const int64_t per_run = ceil_div(panels, std::clamp<int64_t>(wanted, 1, panels));
  const int64_t runs = ceil_div(panels, per_run);
  // An f32 A with contiguous rows is read in place; any other A is packed (and widened)
  // once, shared by every task (a task's A block is read from it per panel run).
  const bool in_place = a.col_stride == 1 && a.element == GemmElement::kF32;
  ScratchFloats a_packed(in_place ? 0 : strips * kRows * k);
  float* ap = a_packed.data();
  if (!in_place) {
    with_elements(a, [&](const auto* data) {
      base::parallel_for(strips, std::max<int64_t>(1, 8192 / (kRows * k)),
                         [&](int64_t s0, int64_t s1) {
                           pack_a_strips<kRows>(data, a.row_stride, a.col_stride, m, k, s0, s1, ap);
                         });
    });
  }
  const auto* a_f32 = static_cast<const float*>(a.data);
  base::parallel_for(row_blocks * runs, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = block_start(t / runs), rows = block_start(t / runs + 1) - i0;
      if (rows <= 0) continue;
      const int64_t p0 = (t % runs) * per_run, p1 = std::min(panels, p0 + per_run);
      for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
        const int64_t depth = std::min(kDepth, k - k0);
        const bool last_slice = k0 + depth == k;
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t j0 = p * w, cols = std::min(w, n - j0);
          const float* pb = bp + p * k * w + k0 * w;
          const float* tile_bias = bias != nullptr && last_slice ? bias + j0 : nullptr;
          for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
            const int64_t tile_rows = std::min(kRows, rows - r0);
            float* tile_c = c + (i0 + r0) * ldc + j0;
            if (in_place) {
              run_tile<kRows, true>(tile_rows, depth, a_f32 + (i0 + r0) * a.row_stride + k0,
                                    a.row_stride, pb, tile_c, ldc, cols, k0 > 0, tile_bias);
            } else {
              run_tile<kRows, false>(tile_rows, depth,
                                     ap + ((i0 + r0) / kRows) * k * kRows + k0 * kRows, 0, pb,
                                     tile_c, ldc, cols, k0 > 0, tile_bias);
            }
          }
        }
      }
      // The task's block of C is finished and still in this core's L2.
      if (epilogue.finish) {
        const int64_t j0 = p0 * w, cols = std::min(n, p1 * w) - j0;
        for (int64_t r = i0; r < i0 + rows; ++r) epilogue.finish(c + r * ldc + j0, r, j0, cols);
      }
    }
  });
}

// C = A · B, then `epilogue`, with B packed by PackImpl.
void GemmImpl(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const float* bp, float* c,
              int64_t ldc, const GemmEpilogue& epilogue) {
  if constexpr (kHasTwelveRowTiles) {
    if (twelve_row_tiles()) return gemm_in_tiles<12>(m, n, k, a, bp, c, ldc, epilogue);
  }
  gemm_in_tiles<6>(m, n, k, a, bp, c, ldc, epilogue);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::runtime::cpu {

HWY_EXPORT(PanelWidthImpl);
HWY_EXPORT(RowTileImpl);
HWY_EXPORT(PackImpl);
HWY_EXPORT(GemmImpl);

namespace {
int64_t packed_floats(int64_t k, int64_t n) {
  static const int64_t width = HWY_DYNAMIC_DISPATCH(PanelWidthImpl)();
  return std::max<int64_t>(1, (n + width - 1) / width * width * k);
}
}  // namespace

// From the cache when this weight was packed before; else packed now, and offered to the
// cache when it has been seen before.
PackedGemmB pack_gemm_b(int64_t k, int64_t n, const GemmOperand& b, bool keep_now) {
  static const int64_t width = HWY_DYNAMIC_DISPATCH(PanelWidthImpl)();
  const PackedWeightKey key{b.data, b.version, k, n, b.row_stride, b.col_stride, b.element, width};
  bool keep = false;
  if (b.version != 0) {
    if (PackedMatrix found = find_packed_weight(key, &keep)) return PackedGemmB(found, k, n);
    keep = keep || keep_now;
  } else {
    count_transient_pack();
  }
  auto storage = std::make_shared<PackedFloats>(packed_floats(k, n));
  HWY_DYNAMIC_DISPATCH(PackImpl)(k, n, b, storage->data());
  if (keep) keep_packed_weight(key, storage);
  return PackedGemmB(storage, k, n);
}

int64_t gemm_row_tile() { return HWY_DYNAMIC_DISPATCH(RowTileImpl)(); }

void set_gemm_row_tile_for_test(int rows) { row_tile_for_test.store(rows); }

void gemm_f32(int64_t m, const GemmOperand& a, const PackedGemmB& b, float* c, int64_t ldc,
              const GemmEpilogue& epilogue) {
  HWY_DYNAMIC_DISPATCH(GemmImpl)(m, b.n(), b.k(), a, b.panels(), c, ldc, epilogue);
}

void gemm_f32(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b, float* c,
              int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (b.version != 0) return gemm_f32(m, a, pack_gemm_b(k, n, b), c, ldc);
  // A transient B (attention's key and value tiles): packed into scratch, no cache lookup.
  count_transient_pack();
  ScratchFloats packed(packed_floats(k, n));
  HWY_DYNAMIC_DISPATCH(PackImpl)(k, n, b, packed.data());
  HWY_DYNAMIC_DISPATCH(GemmImpl)(m, n, k, a, packed.data(), c, ldc, GemmEpilogue{});
}

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
