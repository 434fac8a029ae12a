#include "runtime/cpu/quantized_gemm.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "kiln/debug.h"
#include "runtime/cpu/packed_weight_cache.h"
#include "runtime/cpu/quantized_dot.h"
#include "runtime/cpu/simd_math.h"

namespace kiln::runtime::cpu {
namespace {

// Rows of C per task: whole tiles of the kernel, and enough of them that each column panel
// read from the cache serves many rows.
constexpr int64_t kRowsPerTask = 64;
// Columns per task: the weight rows a task streams (at 4.5 bits a value, 16 rows of 4096
// values are 37 KB, which stay in L2 while every row tile of the task reads them).
constexpr int64_t kColumnsPerTask = 16;
// From this many rows on, panels (quantized_dot.h's PanelTile) pay for their decoding.
constexpr int64_t kPanelRows = 16;
// The columns a task decodes into panels (64 to 256 of k values), and the rows it runs
// through them at a time (their activations stay in cache across the panels).
constexpr int64_t kPanelColumnsPerTask = 64;
constexpr int64_t kPanelRowBlock = 32;
// Below this many rows a product keeps its weight's decoded panels between calls (see
// run_panels): with 16 rows the decoding is about a third of the panel kernel's time; from
// here on the rows amortize it, and the panels (1.5 bytes a value, 2.7 times a Q4 weight)
// would cost memory for little.
constexpr int64_t kKeptPanelRows = 64;

struct alignas(64) PanelLine {
  uint8_t bytes[64];
};

// Row `row` of A as f32 values (converted into `scratch` unless A holds contiguous f32).
const float* row_values(const GemmOperand& a, int64_t row, int64_t k, std::vector<float>& scratch) {
  const char* base = static_cast<const char*>(a.data);
  if (a.element == GemmElement::kF32 && (a.col_stride == 1 || k <= 1)) {
    return reinterpret_cast<const float*>(base) + row * a.row_stride;
  }
  scratch.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t at = row * a.row_stride + i * a.col_stride;
    switch (a.element) {
      case GemmElement::kF32:
        scratch[i] = reinterpret_cast<const float*>(base)[at];
        break;
      case GemmElement::kBF16:
        scratch[i] = static_cast<float>(reinterpret_cast<const BFloat16*>(base)[at]);
        break;
      case GemmElement::kF16:
        scratch[i] = static_cast<float>(reinterpret_cast<const Half*>(base)[at]);
        break;
    }
  }
  return scratch.data();
}

// The epilogue on the block of C a task has just computed (rows r0 to r0 + rows, columns j0
// to j0 + cols), while it is in the core's cache: `bias` (the epilogue's, or null where the
// panel kernels added it as they stored), then the epilogue's finish.
void finish_block(const float* bias, const GemmEpilogue& epilogue, float* c, int64_t ldc,
                  int64_t r0, int64_t rows, int64_t j0, int64_t cols) {
  if (bias == nullptr && !epilogue.finish) return;
  for (int64_t r = r0; r < r0 + rows; ++r) {
    float* values = c + r * ldc + j0;
    if (bias != nullptr) simd_add(values, bias + j0, values, static_cast<size_t>(cols));
    if (epilogue.finish) epilogue.finish(values, r, j0, cols);
  }
}

// The product on the direct tile kernel: tasks of kRowsPerTask rows by kColumnsPerTask
// columns, reading the weight's blocks where they lie.
void run_tiles(int64_t m, const QuantizedMatrix& w, const ActivationBlock* activations, float* c,
               int64_t ldc, const GemmEpilogue& epilogue) {
  const int64_t n = w.n, k = w.k, blocks = k / 32;
  const DotTileKernel kernel = dot_tile_kernel();
  const int64_t row_tasks = (m + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t column_tasks = (n + kColumnsPerTask - 1) / kColumnsPerTask;
  // Tasks run column panel after column panel, each over every row block: a worker's share
  // is a run of whole panels, so each weight row is streamed from memory once.
  base::parallel_for(row_tasks * column_tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = (t % row_tasks) * kRowsPerTask, j0 = (t / row_tasks) * kColumnsPerTask;
      DotTile tile{w.format,
                   activations + r0 * blocks,
                   blocks,
                   static_cast<int>(std::min(kRowsPerTask, m - r0)),
                   w.data + j0 * w.row_bytes,
                   w.row_bytes,
                   static_cast<int>(std::min(kColumnsPerTask, n - j0)),
                   k,
                   c + r0 * ldc + j0,
                   ldc};
      kernel(tile);
      finish_block(epilogue.bias, epilogue, c, ldc, r0, tile.rows, j0, tile.cols);
    }
  });
}

// The product on the panel kernel. Tasks are groups of panels: each decodes its panels
// once, then runs blocks of rows through all of them while the rows' activations are in
// cache. Each task reads every row's activations once: the fewer tasks, the fewer reads,
// but each worker needs a few for balance.
//
// A product of fewer than kKeptPanelRows rows of a weight whose contents it has seen before
// keeps the decoded panels (packed_weight_cache.h, as the f32 GEMM keeps its packed weights):
// the second time it decodes them into a copy it offers the cache, from the third on it
// uses that copy as it is.
void run_panels(int64_t m, const QuantizedMatrix& w, const ActivationBlock* activations, float* c,
                int64_t ldc, const GemmEpilogue& epilogue, const PanelKernel& panel) {
  const int64_t k = w.k, n = w.n, blocks = k / 32;
  const int64_t width = panel.columns;
  const int64_t panels = (n + width - 1) / width, lines = panel.bytes(k) / 64;
  const int64_t per_task =
      std::clamp<int64_t>(panels / (2 * base::worker_count()), kPanelColumnsPerTask / width,
                          4 * kPanelColumnsPerTask / width);
  const int64_t groups = (panels + per_task - 1) / per_task;
  PackedWeightKey key;
  PackedMatrix kept;
  std::shared_ptr<PackedFloats> fresh;
  if (w.version != 0 && m < kKeptPanelRows) {
    key = {w.data,
           w.version,
           k,
           n,
           w.row_bytes,
           0,
           GemmElement::kF32,
           panel.columns,
           static_cast<int>(w.format)};
    bool keep = false;
    kept = find_packed_weight(key, &keep);
    // Not when the cache would refuse them (past its budget): a copy made every call for
    // nothing would cost more than the scratch.
    if (kept == nullptr && keep && panels * lines * 64 <= packed_weight_budget()) {
      fresh = std::make_shared<PackedFloats>(panels * lines * 16);
    }
  }
  // Every panel's bytes in one array (kept or fresh), else none: each task's own scratch.
  // (The kernel only reads a panel it is told is decoded: the const_cast writes nothing.)
  uint8_t* const all_panels =
      kept != nullptr    ? const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(kept->data()))
      : fresh != nullptr ? reinterpret_cast<uint8_t*>(fresh->data())
                         : nullptr;
  base::parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    // Each worker's scratch, kept between products (as the activations).
    thread_local std::vector<PanelLine> scratch;
    if (all_panels == nullptr && scratch.size() < static_cast<size_t>(per_task * lines)) {
      scratch.resize(static_cast<size_t>(per_task * lines));
    }
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t first = g * per_task, last = std::min(panels, first + per_task);
      auto bytes = [&](int64_t p) {
        return all_panels != nullptr ? all_panels + p * lines * 64
                                     : scratch[(p - first) * lines].bytes;
      };
      auto tile = [&](int64_t p, int64_t r0, int64_t rows) {
        const int64_t j0 = width * p;
        return DotTile{w.format,
                       activations + r0 * blocks,
                       blocks,
                       static_cast<int>(rows),
                       w.data + j0 * w.row_bytes,
                       w.row_bytes,
                       static_cast<int>(std::min(width, n - j0)),
                       k,
                       c + r0 * ldc + j0,
                       ldc};
      };
      if (kept == nullptr) {
        for (int64_t p = first; p < last; ++p) panel.run({tile(p, 0, 0), bytes(p), false});
      }
      for (int64_t r0 = 0; r0 < m; r0 += kPanelRowBlock) {
        const int64_t rows = std::min(kPanelRowBlock, m - r0);
        for (int64_t p = first; p < last; ++p) {
          const float* bias = epilogue.bias != nullptr ? epilogue.bias + width * p : nullptr;
          panel.run({tile(p, r0, rows), bytes(p), true, bias});
        }
        const int64_t j0 = first * width;
        finish_block(nullptr, epilogue, c, ldc, r0, rows, j0, std::min(n, last * width) - j0);
      }
    }
  });
  if (fresh != nullptr) keep_packed_weight(key, std::move(fresh));
}

}  // namespace

void quantized_gemm(int64_t m, const GemmOperand& a, const QuantizedMatrix& w, float* c,
                    int64_t ldc, const GemmEpilogue& epilogue) {
  const int64_t k = w.k, n = w.n, blocks = k / 32;
  if (m == 0 || n == 0) return;
  // A's rows rounded to 8-bit blocks, once for every column. The buffer is the calling
  // thread's and kept between products: a fresh one of a megabyte or more comes from mmap,
  // and its page faults cost small products a good part of their time.
  thread_local std::unique_ptr<ActivationBlock[]> kept_activations;
  thread_local int64_t kept_blocks = 0;
  if (kept_blocks < m * blocks) {
    kept_activations.reset(new ActivationBlock[m * blocks]);
    kept_blocks = m * blocks;
  }
  ActivationBlock* const activations = kept_activations.get();
  base::parallel_for(
      m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
        std::vector<float> scratch;
        for (int64_t r = r0; r < r1; ++r) {
          quantize_activations(row_values(a, r, k, scratch), k, activations + r * blocks);
        }
      });
  if (const PanelKernel panel = panel_kernel(); panel.run != nullptr && m >= kPanelRows) {
    run_panels(m, w, activations, c, ldc, epilogue, panel);
  } else {
    run_tiles(m, w, activations, c, ldc, epilogue);
  }
}

}  // namespace kiln::runtime::cpu
