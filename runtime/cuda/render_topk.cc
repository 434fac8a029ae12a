// topk_indices along the anchor axis: a block per row, k rounds. Round j picks the block's
// first element in topk's order (kiln::math::topk_before) among those ordered after round
// j - 1's pick, so no element is picked twice and no list is kept: O(k * extent / threads)
// per row, for the small k of sampling. The row's values stay in dynamic shared memory when
// the launch gives room for them, else each round recomputes them from global memory.
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

std::string render_topk(const KernelWriter& writer) {
  const jit::KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const int operand = program.anchor_operands[0];
  // The operand is compared as is (lowering does not cast it to the I64 result).
  const std::string x = register_type(program.instrs[operand].dtype);
  const std::string largest = program.anchor_attrs.largest ? "true" : "false";
  return absl::StrCat(
      "  __shared__ ", x, " select_value[32];\n  __shared__ I select_index[32];\n",
      open_row_loop(writer), declare_row_cache(x), "    const I picks = (I)a.shape[0][", axis,
      "];\n", "    if (persistent) {\n",
      "      for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n", "        idx1[", axis,
      "] = k;\n", writer.space_code(1, "idx1"), "        row_cache[k] = v", operand,
      ";\n      }\n    }\n",  // each thread reads back only the positions it wrote
      "    ", x, " last_value = 0;\n    I last = -1;\n",
      "    for (I j = 0; j < picks; ++j) {\n      ", x, " best_value = 0;\n      I best = -1;\n",
      "      for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n        ", x, " x;\n",
      "        if (persistent) {\n          x = row_cache[k];\n        } else {\n",
      "          idx1[", axis, "] = k;\n", writer.space_code(1, "idx1"), "          x = v", operand,
      ";\n        }\n",
      "        if (last >= 0 && !kiln::math::topk_before(last_value, last, x, k, ", largest,
      ")) continue;\n", "        if (best < 0 || kiln::math::topk_before(x, k, best_value, best, ",
      largest, ")) {\n          best_value = x;\n          best = k;\n        }\n      }\n",
      "      block_select(best_value, best, ", largest, ", select_value, select_index);\n",
      "      last_value = best_value;\n      last = best;\n",
      "      if (threadIdx.x == 0) {\n        idx1[", axis,
      "] = j;\n        const I flat = ", writer.flatten(0, "idx1"), ";\n",
      writer.epilogue("(i64)best", "flat"), "      }\n    }\n  }\n");
}

}  // namespace kiln::runtime::cuda
