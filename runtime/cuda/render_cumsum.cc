// cumsum along the anchor axis: a block per row. The row goes by in chunks; each chunk is a
// block-wide scan plus the sum of the chunks before it. A reverse cumsum walks the row from
// its end: scan step k is the row's element extent - 1 - k. An exclusive one leaves each
// element out of its own sum: each thread's sum is the block's exclusive scan (the threads
// before it), never an inclusive sum with the element subtracted again (an inf would give
// NaN). A forward row along the innermost dim that is contiguous and aligned (checked once
// per launch) goes by in chunks of E elements per thread, read and written as 16-byte
// vectors: each thread scans its E elements serially and the block scans the threads'
// totals, so one block-wide scan serves E elements. A scan along an outer axis with at
// least 32 rows takes column_scan (below). Other rows take one element per thread per
// chunk. Either way an element's output index is the row's base plus its position times
// the row's stride (no division per element).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

namespace {

// The row position of scan step `k` (an expression): k itself, or extent - 1 - k when the
// scan runs from the end.
std::string position(const jit::KernelProgram& program, const std::string& k) {
  return program.anchor_attrs.reverse ? absl::StrCat("(extent - 1 - ", k, ")") : k;
}

// A scan along an outer axis, when there are at least 32 rows: a block per 32 consecutive
// rows, which lie along the innermost dim (lane l on row 32 b + l, so a warp's loads are
// consecutive), and the 8 warps on 8 consecutive scan steps at a time: each chunk of 8 goes
// through shared memory, where every thread sums its column's steps before its own (and its
// own unless exclusive; in warp order: the result does not depend on timing) and the whole
// chunk, which it carries to the next. Returns after the scan; fewer rows take the row loop.
std::string column_scan(const KernelWriter& writer, const std::string& sum) {
  const jit::KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const int rank = writer.rank(1);
  std::vector<int> row_dims;  // every dim but the axis: which row
  for (int d = 0; d < rank; ++d) {
    if (d != axis) row_dims.push_back(d);
  }
  const std::string upto = program.anchor_attrs.exclusive
                               ? "        if (v == warp) upto = total;\n"
                                 "        total += column_shared[v][lane];\n"
                               : "        total += column_shared[v][lane];\n"
                                 "        if (v == warp) upto = total;\n";
  std::string s = absl::StrCat(
      "  __shared__ ", sum, " column_shared[8][32];\n  {\n", "    const I extent = (I)a.shape[1][",
      axis, "];\n    const I rows = (", writer.numel(1), ") / (extent > 0 ? extent : (I)1);\n",
      "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n",
      "    if (rows >= 32) {\n",
      "      for (I group = blockIdx.x; group * 32 < rows; group += gridDim.x) {\n",
      "      const I row = group * 32 + lane;\n      const bool active = row < rows;\n",
      "      I idx1[", writer.index_rank(), "] = {0};\n      if (active) ",
      writer.unravel_dims(row_dims, "row"),
      "\n      const I row_base = ", writer.flatten(1, "idx1"), ";\n      const I row_step = (I)1");
  for (int d = axis + 1; d < rank; ++d) absl::StrAppend(&s, " * (I)a.shape[1][", d, "]");
  absl::StrAppend(
      &s, ";\n      ", sum, " carry = 0;\n",
      "      for (I chunk = 0; chunk < extent; chunk += 8) {\n",
      "      const I k = chunk + warp, at = ", position(program, "k"), ";\n      ", sum,
      " x = 0;\n", "      if (active && k < extent) {\n      idx1[", axis, "] = at;\n",
      writer.space_code(1, "idx1"), "      x = (", sum, ")v", program.anchor_operands[0],
      ";\n      }\n", "      column_shared[warp][lane] = x;\n      __syncthreads();\n      ", sum,
      " upto = 0, total = 0;\n      #pragma unroll\n      for (int v = 0; v < 8; ++v) {\n", upto,
      "      }\n      __syncthreads();\n      if (active && k < extent) {\n",
      "      const I flat = row_base + at * row_step;\n",
      writer.epilogue(absl::StrCat("(", register_type(program.anchor_dtype), ")(carry + upto)"),
                      "flat", "idx1"),
      "      }\n      carry += total;\n      }\n      }\n      return;\n    }\n  }\n");
  return s;
}

// Chunks of E elements per thread, read and written as vectors (forward scans only): thread
// t scans its E elements serially, the block's exclusive scan of the threads' totals gives
// what comes before them.
std::string vector_rows(const KernelWriter& writer, const std::string& sum, int e) {
  const jit::KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const std::string t = register_type(program.anchor_dtype);
  // Element e's sum: the elements before it in the thread's group, and itself unless exclusive.
  const std::string own = program.anchor_attrs.exclusive
                              ? absl::StrCat("(e > 0 ? local[e - 1] : (", sum, ")0)")
                              : "local[e]";
  return absl::StrCat(
      "    if (vectorizable) {\n",
      "      // Thread t scans elements [chunk + E t, chunk + E t + E) of each chunk.\n",
      "      for (I chunk = 0; chunk < extent; chunk += (I)blockDim.x * ", e, ") {\n",
      "      const I k = chunk + (I)threadIdx.x * ", e, ";\n      ", sum, " local[", e,
      "] = {0};\n      if (k < extent) {\n      idx1[", axis, "] = k;\n",
      writer.vector_loads(1, e, "idx1", "      "),
      "      #pragma unroll\n      for (int e = 0; e < ", e, "; ++e) {\n",
      writer.space_code(1, "", "e"), "      local[e] = (", sum, ")v", program.anchor_operands[0],
      " + (e > 0 ? local[e - 1] : (", sum, ")0);\n      }\n      }\n      ", sum,
      " chunk_total;\n      const ", sum, " before = carry + block_exclusive_scan<", sum,
      ">(local[", e - 1, "], scan_shared, &chunk_total);\n      carry += chunk_total;\n",
      "      if (k < extent) {\n      ", t, " value[", e,
      "];\n      #pragma unroll\n      for (int e = 0; e < ", e, "; ++e) value[e] = (", t,
      ")(before + ", own, ");\n", vector_epilogue(writer, e, "value", "idx1", "row_base + k"),
      "      }\n      }\n    } else {\n");
}

// One element per thread per chunk of blockDim.x scan steps.
std::string scalar_rows(const KernelWriter& writer, const std::string& sum) {
  const jit::KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const std::string scan =
      program.anchor_attrs.exclusive ? "block_exclusive_scan<" : "block_inclusive_scan<";
  return absl::StrCat(
      "    for (I chunk = 0; chunk < extent; chunk += blockDim.x) {\n",
      "      const I k = chunk + threadIdx.x, at = ", position(program, "k"), ";\n      ", sum,
      " x = 0;\n", "      if (k < extent) {\n        idx1[", axis, "] = at;\n",
      writer.space_code(1, "idx1"), "        x = (", sum, ")v", program.anchor_operands[0],
      ";\n      }\n      ", sum, " chunk_total;\n", "      const ", sum, " y = carry + ", scan, sum,
      ">(x, scan_shared, &chunk_total);\n      carry += chunk_total;\n",
      "      if (k < extent) {\n        const I flat = row_base + at * row_step;\n",
      writer.epilogue(absl::StrCat("(", register_type(program.anchor_dtype), ")y"), "flat", "idx1"),
      "      }\n    }\n");
}

}  // namespace

std::string render_cumsum(const KernelWriter& writer) {
  const jit::KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const int rank = writer.rank(1);
  // Integers add as u64 so that overflow wraps (signed overflow is undefined).
  const std::string sum = jit::register_class(program.anchor_dtype) == jit::RegisterClass::kInt
                              ? "u64"
                              : register_type(program.anchor_dtype);
  // The 16-byte path: only for forward rows along the innermost dim.
  const int e = rank > 0 && axis == rank - 1 && !program.anchor_attrs.reverse
                    ? element_group_width(program, {1})
                    : 1;
  std::string s = absl::StrCat("  __shared__ ", sum, " scan_shared[32];\n");
  if (e > 1) {
    absl::StrAppend(&s, "  const bool vectorizable = ",
                    vector_loads_condition(program, {1}, axis, e, " &&\n      "),
                    " &&\n      a.shape[1][", axis, "] % ", e, " == 0;\n");
  }
  if (rank >= 2 && axis < rank - 1) absl::StrAppend(&s, column_scan(writer, sum));
  absl::StrAppend(&s, open_row_loop(writer), "    idx1[", axis,
                  "] = 0;\n    const I row_base = ", writer.flatten(1, "idx1"),
                  ";\n    const I row_step = (I)1");
  for (int d = axis + 1; d < rank; ++d) absl::StrAppend(&s, " * (I)a.shape[1][", d, "]");
  absl::StrAppend(&s, ";\n    (void)row_step;\n    ", sum, " carry = 0;\n");
  if (e > 1) absl::StrAppend(&s, vector_rows(writer, sum, e));
  absl::StrAppend(&s, scalar_rows(writer, sum));
  if (e > 1) absl::StrAppend(&s, "    }\n");
  absl::StrAppend(&s, "  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
