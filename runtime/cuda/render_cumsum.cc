// cumsum along the anchor axis: a block per row. The row goes by in chunks of blockDim.x
// elements; each chunk is a block-wide inclusive scan plus the sum of the chunks before it.
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

std::string render_cumsum(const KernelWriter& w) {
  const jit::KernelProgram& p = w.program();
  const int axis = p.anchor_attrs.axis;
  const int operand = p.anchor_operands[0];
  const std::string t = register_type(p.anchor_dtype);
  // Integers add as u64 so that overflow wraps (signed overflow is undefined).
  const std::string sum =
      jit::register_class(p.anchor_dtype) == jit::RegisterClass::kInt ? "u64" : t;
  return absl::StrCat(
      "  __shared__ ", sum, " scan_shared[32];\n", open_row_loop(w), "    ", sum, " carry = 0;\n",
      "    for (I chunk = 0; chunk < extent; chunk += blockDim.x) {\n",
      "      const I k = chunk + threadIdx.x;\n      ", sum, " x = 0;\n",
      "      if (k < extent) {\n        idx1[", axis, "] = k;\n", w.space_code(1, "idx1"),
      "        x = (", sum, ")v", operand, ";\n      }\n      ", sum, " chunk_total;\n",
      "      const ", sum, " y = carry + block_inclusive_scan<", sum,
      ">(x, scan_shared, &chunk_total);\n      carry += chunk_total;\n",
      "      if (k < extent) {\n        const I flat = ", w.flatten(1, "idx1"), ";\n",
      w.epilogue(absl::StrCat("(", t, ")y"), "flat"), "      }\n    }\n  }\n");
}

}  // namespace kiln::runtime::cuda
