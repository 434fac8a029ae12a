// cumsum along the anchor axis: a block per row. The row goes by in chunks; each chunk is a
// block-wide inclusive scan plus the sum of the chunks before it. A row along the innermost
// dim that is contiguous and aligned (checked once per launch) goes by in chunks of E
// elements per thread, read and written as 16-byte vectors: each thread scans its E
// elements serially and the block scans the threads' totals, so one block-wide scan serves
// E elements. A scan along an outer axis with at least 32 rows takes column_scan (below).
// Other rows take one element per thread per chunk. Either way an element's output index is
// the row's base plus k times the row's stride (no division per element).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

namespace {

// A scan along an outer axis, when there are at least 32 rows: a block per 32 consecutive
// rows, which lie along the innermost dim (lane l on row 32 b + l, so a warp's loads are
// consecutive), and the 8 warps on 8 consecutive positions of the axis at a time: each
// chunk of 8 goes through shared memory, where every thread sums its column's positions up
// to its own (in warp order: the result does not depend on timing) and the whole chunk,
// which it carries to the next. Returns after the scan; fewer rows take the row loop.
std::string column_scan(const KernelWriter& w, const std::string& sum) {
  const jit::KernelProgram& p = w.program();
  const int axis = p.anchor_attrs.axis;
  const int rank = w.rank(1);
  std::vector<int> row_dims;  // every dim but the axis: which row
  for (int d = 0; d < rank; ++d) {
    if (d != axis) row_dims.push_back(d);
  }
  std::string s = absl::StrCat(
      "  __shared__ ", sum, " column_shared[8][32];\n  {\n", "    const I extent = (I)a.shape[1][",
      axis, "];\n    const I rows = (", w.numel(1), ") / (extent > 0 ? extent : (I)1);\n",
      "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n",
      "    if (rows >= 32) {\n",
      "      for (I group = blockIdx.x; group * 32 < rows; group += gridDim.x) {\n",
      "      const I row = group * 32 + lane;\n      const bool active = row < rows;\n",
      "      I idx1[", w.index_rank(), "] = {0};\n      if (active) ",
      w.unravel_dims(row_dims, "row"), "\n      const I row_base = ", w.flatten(1, "idx1"),
      ";\n      const I row_step = (I)1");
  for (int d = axis + 1; d < rank; ++d) absl::StrAppend(&s, " * (I)a.shape[1][", d, "]");
  absl::StrAppend(
      &s, ";\n      ", sum, " carry = 0;\n",
      "      for (I chunk = 0; chunk < extent; chunk += 8) {\n",
      "      const I k = chunk + warp;\n      ", sum, " x = 0;\n",
      "      if (active && k < extent) {\n      idx1[", axis, "] = k;\n", w.space_code(1, "idx1"),
      "      x = (", sum, ")v", p.anchor_operands[0], ";\n      }\n",
      "      column_shared[warp][lane] = x;\n      __syncthreads();\n      ", sum,
      " upto = 0, total = 0;\n      #pragma unroll\n      for (int v = 0; v < 8; ++v) {\n",
      "        total += column_shared[v][lane];\n        if (v == warp) upto = total;\n",
      "      }\n      __syncthreads();\n      if (active && k < extent) {\n",
      "      const I flat = row_base + k * row_step;\n",
      w.epilogue(absl::StrCat("(", register_type(p.anchor_dtype), ")(carry + upto)"), "flat",
                 "idx1"),
      "      }\n      carry += total;\n      }\n      }\n      return;\n    }\n  }\n");
  return s;
}

}  // namespace

std::string render_cumsum(const KernelWriter& w) {
  const jit::KernelProgram& p = w.program();
  const int axis = p.anchor_attrs.axis;
  const int rank = w.rank(1);
  const int operand = p.anchor_operands[0];
  const std::string t = register_type(p.anchor_dtype);
  // Integers add as u64 so that overflow wraps (signed overflow is undefined).
  const std::string sum =
      jit::register_class(p.anchor_dtype) == jit::RegisterClass::kInt ? "u64" : t;
  // The 16-byte path: only for rows along the innermost dim.
  const int e = rank > 0 && axis == rank - 1 ? element_group_width(p, {1}) : 1;
  std::string s = absl::StrCat("  __shared__ ", sum, " scan_shared[32];\n");
  if (e > 1) {
    absl::StrAppend(
        &s, "  const bool vectorizable = ", vector_loads_condition(p, {1}, axis, e, " &&\n      "),
        " &&\n      a.shape[1][", axis, "] % ", e, " == 0;\n");
  }
  if (rank >= 2 && axis < rank - 1) absl::StrAppend(&s, column_scan(w, sum));
  absl::StrAppend(&s, open_row_loop(w), "    idx1[", axis,
                  "] = 0;\n    const I row_base = ", w.flatten(1, "idx1"),
                  ";\n    const I row_step = (I)1");
  for (int d = axis + 1; d < rank; ++d) absl::StrAppend(&s, " * (I)a.shape[1][", d, "]");
  absl::StrAppend(&s, ";\n    (void)row_step;\n    ", sum, " carry = 0;\n");
  if (e > 1) {
    absl::StrAppend(
        &s, "    if (vectorizable) {\n",
        "      // Thread t scans elements [chunk + E t, chunk + E t + E) of each chunk.\n",
        "      for (I chunk = 0; chunk < extent; chunk += (I)blockDim.x * ", e, ") {\n",
        "      const I k = chunk + (I)threadIdx.x * ", e, ";\n      ", sum, " local[", e,
        "] = {0};\n      if (k < extent) {\n      idx1[", axis, "] = k;\n",
        vector_space_loads(w, 1, e, "idx1"), "      #pragma unroll\n      for (int e = 0; e < ", e,
        "; ++e) {\n", w.space_code(1, "", "e"), "      local[e] = (", sum, ")v", operand,
        " + (e > 0 ? local[e - 1] : (", sum, ")0);\n      }\n      }\n      ", sum,
        " chunk_total;\n      const ", sum, " before = carry + block_inclusive_scan<", sum,
        ">(local[", e - 1, "], scan_shared, &chunk_total) - local[", e - 1,
        "];\n      carry += chunk_total;\n      if (k < extent) {\n      ", t, " value[", e,
        "];\n      #pragma unroll\n      for (int e = 0; e < ", e, "; ++e) value[e] = (", t,
        ")(before + local[e]);\n", vector_epilogue(w, e, "value", "idx1", "row_base + k"),
        "      }\n      }\n    } else {\n");
  }
  absl::StrAppend(&s, "    for (I chunk = 0; chunk < extent; chunk += blockDim.x) {\n",
                  "      const I k = chunk + threadIdx.x;\n      ", sum, " x = 0;\n",
                  "      if (k < extent) {\n        idx1[", axis, "] = k;\n",
                  w.space_code(1, "idx1"), "        x = (", sum, ")v", operand,
                  ";\n      }\n      ", sum, " chunk_total;\n", "      const ", sum,
                  " y = carry + block_inclusive_scan<", sum,
                  ">(x, scan_shared, &chunk_total);\n      carry += chunk_total;\n",
                  "      if (k < extent) {\n        const I flat = row_base + k * row_step;\n",
                  w.epilogue(absl::StrCat("(", t, ")y"), "flat", "idx1"), "      }\n    }\n");
  if (e > 1) absl::StrAppend(&s, "    }\n");
  absl::StrAppend(&s, "  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
