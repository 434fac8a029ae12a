// update_slice: a thread per group of elements of the update (grid-stride, the multi-index
// stepped as in concat), written at `start` along the axis into output 0, which already
// holds x (the backend's copy, or x's own buffer). Nothing else is touched, so a KV cache
// write costs the update's size, not the cache's. A region write moves each element by the
// region's starts too (constants of the program).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {
namespace {

// One pass over the update in groups of `e` elements along the innermost dim (e = 1: one
// element at a time, through the update's views).
std::string update_loop(const KernelWriter& writer, int e) {
  const jit::KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const int operand = program.anchor_operands[0];
  const SteppedLoop loop = stepped_loop(writer, 1, e, "idx1");
  std::string s = loop.open;
  if (e > 1) {
    absl::StrAppend(&s, writer.vector_loads(1, e, "idx1", "      "), "      ",
                    register_type(program.anchor_dtype), " value[", e, "];\n      #pragma unroll\n",
                    "      for (int e = 0; e < ", e, "; ++e) {\n", writer.space_code(1, "", "e"),
                    "      value[e] = v", operand, ";\n      }\n");
  } else {
    absl::StrAppend(&s, writer.space_code(1, "idx1"));
  }
  // The group's place in the output: idx1 moved by start along the axis, and by a region's
  // starts along the other dims (then moved back).
  const std::vector<int64_t>& region = program.anchor_attrs.offsets;
  std::string move, move_back;
  for (size_t d = 0; d < region.size(); ++d) {
    if (region[d] == 0) continue;
    absl::StrAppend(&move, "      idx1[", d, "] += ", region[d], ";  // the region's start\n");
    absl::StrAppend(&move_back, "      idx1[", d, "] -= ", region[d], ";\n");
  }
  absl::StrAppend(&s, "      idx1[", axis, "] += start;\n", move,
                  "      const I flat = ", writer.flatten(0, "idx1"), ";\n");
  if (e > 1) {
    absl::StrAppend(&s, vector_epilogue(writer, e, "value", "idx1", "flat"));
  } else {
    absl::StrAppend(&s, writer.epilogue(absl::StrCat("v", operand), "flat", "idx1"));
  }
  absl::StrAppend(&s, "      idx1[", axis, "] -= start;\n", move_back);
  return s + loop.close;
}

// `start`: the launch parameter, or the value of a start tensor read from its buffer and
// checked against x (out of range: reported to the host, which raises it after the launch,
// and nothing is written).
std::string start_code(const jit::KernelProgram& program) {
  if (program.anchor_start_input < 0)
    return absl::StrCat("  const I start = (I)a.p[", program.anchor_param, "];\n");
  const int k = program.anchor_start_input, axis = program.anchor_attrs.axis;
  const char* type = program.input_dtypes[k] == DType::I64 ? "long long" : "int";
  return absl::StrCat(
      "  const i64 start_value = (i64)*(const ", type, "*)a.in[", k, "];  // the start tensor\n",
      "  const i64 last_start = a.shape[0][", axis, "] - a.shape[1][", axis, "];\n",
      "  if (start_value < 0 || start_value > last_start) {\n",
      "    kiln_report_index_error(a.index_error, start_value, last_start, ",
      static_cast<int>(ops::OpKind::UpdateSlice), ");  // update_slice\n    return;\n  }\n",
      "  const I start = (I)start_value;\n");
}

}  // namespace

// The groups are 16-byte vectors when the update's loads are contiguous along the innermost
// dim and aligned, both innermost dims hold whole vectors and, for an update along that dim,
// start is a multiple of the vector (checked once per launch); single elements otherwise.
std::string render_update_slice(const KernelWriter& writer) {
  const jit::KernelProgram& program = writer.program();
  const int last = writer.rank(1) - 1;
  std::string s = start_code(program);
  int e = element_group_width(program, {1});
  // A region starting inside a vector along the innermost dim writes single elements.
  const std::vector<int64_t>& region = program.anchor_attrs.offsets;
  if (!region.empty() && region[last] % e != 0) e = 1;
  if (e <= 1) return absl::StrCat(s, "  {\n", update_loop(writer, 1), "  }\n");
  std::string condition = absl::StrCat(vector_loads_condition(program, {1}, last, e, " &&\n      "),
                                       " &&\n      a.shape[0][", last, "] % ", e,
                                       " == 0 && a.shape[1][", last, "] % ", e, " == 0");
  if (program.anchor_attrs.axis == last) absl::StrAppend(&condition, " && start % ", e, " == 0");
  return absl::StrCat(s, "  const bool vectorizable = ", condition, ";\n",
                      "  if (vectorizable) {\n    // 16-byte groups of ", e, " elements.\n",
                      update_loop(writer, e), "  } else {\n    // One element at a time.\n",
                      update_loop(writer, 1), "  }\n");
}

}  // namespace kiln::runtime::cuda
