// index_add: a thread per element of the source (grid-stride, the multi-index stepped as in
// concat), added atomically into output 0, which already holds a copy of x, at the position
// its slice's index names. An index out of range is reported to the host (which raises it
// after the launch) and adds nothing. The additions into one element land in whatever order
// the threads reach it, so a float result may differ from the host's in its last bits.
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

std::string render_index_add(const KernelWriter& writer) {
  const jit::KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const int operand = program.anchor_operands[0];
  const int k = program.anchor_index_input;
  const DType out = program.output_dtypes[0];
  const std::string value = cast(program.instrs[operand].dtype, out, absl::StrCat("v", operand));
  const std::string target = absl::StrCat("(", storage_type(out), "*)a.out[0] + flat");
  std::string add;
  if (out == DType::F16 || out == DType::BF16) {
    add = absl::StrCat("kiln_atomic_add_16(", target, ", ", value, ", ",
                       out == DType::BF16 ? "true" : "false", ")");
  } else if (out == DType::F8E4M3 || out == DType::F8E5M2) {
    add = absl::StrCat("kiln_atomic_add_fp8(", target, ", ", value, ", ",
                       out == DType::F8E5M2 ? "true" : "false", ")");
  } else {
    add = absl::StrCat("kiln_atomic_add(", target, ", ", value, ")");
  }
  const SteppedLoop loop = stepped_loop(writer, 1, 1, "idx1");
  const std::string index_type = storage_type(program.input_dtypes[k]);
  std::string s = absl::StrCat(
      "  const i64 extent = (i64)a.shape[0][", axis, "];  // x's extent along the axis\n",
      "  const ", index_type, "* index = (const ", index_type, "*)a.in[", k, "];\n",
      "  // Every index checked once, also when the source is empty (as the host checks them).\n",
      "  for (i64 l = (i64)blockIdx.x * blockDim.x + threadIdx.x; l < (i64)a.shape[1][", axis,
      "];\n       l += (i64)gridDim.x * blockDim.x) {\n",
      "    if (kiln::math::gather_position<i64>((i64)index[l], extent) < 0) {\n",
      "      kiln_report_index_error(a.index_error, (i64)index[l], extent, ",
      static_cast<int>(ops::OpKind::IndexAdd), ");  // index_add\n    }\n  }\n  {\n", loop.open,
      writer.space_code(1, "idx1"), "      const i64 raw = (i64)index[idx1[", axis, "]];\n",
      "      const i64 position = kiln::math::gather_position<i64>(raw, extent);\n",
      "      if (position >= 0) {  // else reported above\n", "        const I slice = idx1[", axis,
      "];\n        idx1[", axis, "] = (I)position;\n",
      "        const I flat = ", writer.flatten(0, "idx1"), ";\n        ", add, ";\n        idx1[",
      axis, "] = slice;\n      }\n", loop.close, "  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
