#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::KernelProgram;
using ops::OpKind;

// One block per row along the anchor axis. When the launch gives the block enough dynamic
// shared memory for the row, pass 1 keeps the row's values (after the prologue) there and
// passes 2 and 3 read them back: the row crosses global memory once. Otherwise every pass
// recomputes the row from global memory. Each thread touches the same positions k in every
// pass, so the cache needs no barrier of its own.
// The start of every row op: extent and rows, then a block-stride loop over the rows that
// sets idx1 (space 1's index) to the row's first element; the caller closes the loop.
std::string open_row_loop(const KernelWriter& w) {
  const int axis = w.program().anchor_attrs.axis;
  std::vector<int> row_dims;  // every dim but the axis: which row
  for (int d = 0; d < w.rank(1); ++d) {
    if (d != axis) row_dims.push_back(d);
  }
  const std::string extent =  // a 0-d x is one row of one element
      w.rank(1) == 0 ? "(I)1" : absl::StrCat("(I)a.shape[1][", axis, "]");
  return absl::StrCat("  const I extent = ", extent, ";\n  const I rows = (", w.numel(1),
                      ") / (extent > 0 ? extent : (I)1);\n",
                      "  for (I row = blockIdx.x; row < rows; row += gridDim.x) {\n", "    I idx1[",
                      w.index_rank(), "] = {0};\n    ", w.unravel_dims(row_dims, "row"), "\n");
}

// Inside the row loop: the block's dynamic shared memory as a cache of the row's values of
// C type `cached`, and whether the launch gave enough of it for the whole row.
std::string declare_row_cache(const std::string& cached) {
  return absl::StrCat("    ", cached, "* const row_cache = dynamic_shared<", cached, ">();\n",
                      "    const bool persistent = (u64)dynamic_shared_bytes() >= (u64)extent * "
                      "sizeof(",
                      cached, ");\n");
}

std::string render_row_norm(const KernelWriter& w) {
  const KernelProgram& p = w.program();
  std::string s;
  const int axis = p.anchor_attrs.axis;
  const OpKind op = p.anchor_op;
  const std::string t = register_type(p.anchor_dtype);
  const int operand = p.anchor_operands[0];
  const std::string cached = register_type(p.instrs[operand].dtype);
  absl::StrAppend(&s, "  __shared__ double shared[32];\n  const double eps = ",
                  p.anchor_param >= 0 ? absl::StrCat("a.p[", p.anchor_param, "]") : "0.0", ";\n",
                  open_row_loop(w), declare_row_cache(cached));
  // Pass 1's value at k: from global memory through the prologue, kept in the cache.
  auto x_from_memory = [&](const std::string& k) {
    return absl::StrCat("      idx1[", axis, "] = ", k, ";\n", w.space_code(1, "idx1"),
                        "      if (persistent) row_cache[", k, "] = v", operand, ";\n",
                        "      const double x = (double)v", operand, ";\n");
  };
  // ... or, in later passes, from the cache when there is one.
  auto x_again = [&](const std::string& k) {
    return absl::StrCat("      idx1[", axis, "] = ", k, ";\n      double x;\n",
                        "      if (persistent) {\n        x = (double)row_cache[", k, "];\n",
                        "      } else {\n", w.space_code(1, "idx1"), "        x = (double)v",
                        operand, ";\n      }\n");
  };
  const bool softmax = op == OpKind::Softmax || op == OpKind::LogSoftmax;
  // Pass 1: the row's max (softmax) or mean (layer_norm); pass 2: sum of exp or squares.
  absl::StrAppend(
      &s, "    double first = ", softmax ? "-1.0 / 0.0" : "0.0", ";\n",
      "    for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n", x_from_memory("k"),
      softmax ? "      first = x > first ? x : first;\n" : "      first += x;\n", "    }\n",
      "    first = block_reduce<double>(first, [](double p, double q) { return ",
      softmax ? "p > q ? p : q" : "p + q", "; }, ", softmax ? "-1.0 / 0.0" : "0.0", ", shared);\n");
  if (softmax)
    absl::StrAppend(&s, "    if (first == 1.0 / 0.0 || first == -1.0 / 0.0) first = 0.0;\n");
  if (op == OpKind::LayerNorm) absl::StrAppend(&s, "    first /= (double)extent;\n");
  if (op == OpKind::RmsNorm) absl::StrAppend(&s, "    first = 0.0;\n");
  absl::StrAppend(
      &s, "    double second = 0.0;\n    for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n",
      x_again("k"),
      softmax ? "      second += exp(x - first);\n"
              : "      second += (x - first) * (x - first);\n",
      "    }\n    second = block_reduce<double>(second, [](double p, double q) { return p + q; "
      "}, 0.0, shared);\n",
      "    for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n", x_again("k"));
  std::string y;
  if (op == OpKind::Softmax) y = "exp(x - first) / second";
  if (op == OpKind::LogSoftmax) y = "x - first - log(second)";
  if (op == OpKind::LayerNorm || op == OpKind::RmsNorm) {
    absl::StrAppend(&s, "      I idx2[", w.index_rank(), "] = {0}; idx2[0] = k;\n",
                    w.space_code(2, "idx2"));
    if (op == OpKind::LayerNorm)
      absl::StrAppend(&s, "      I idx3[", w.index_rank(), "] = {0}; idx3[0] = k;\n",
                      w.space_code(3, "idx3"));
    y = absl::StrCat("(x - first) / sqrt(second / (double)extent + eps) * (double)v",
                     p.anchor_operands[1]);
    if (op == OpKind::LayerNorm) absl::StrAppend(&y, " + (double)v", p.anchor_operands[2]);
  }
  absl::StrAppend(&s, "      const I flat = ", w.flatten(1, "idx1"), ";\n",
                  w.epilogue(absl::StrCat("(", t, ")(", y, ")"), "flat"), "    }\n  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
