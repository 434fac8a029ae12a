// Concat, and the element loops it shares with update_slice: a grid-stride loop whose
// multi-index steps by the grid's stride (no division per element), taking E elements along
// the innermost dim at a time as 16-byte vectors when the launch allows it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::Instr;
using jit::InstrKind;
using jit::KernelProgram;

int element_group_width(const KernelProgram& program, const std::vector<int>& spaces) {
  int widest = 1;
  for (int space : spaces) {
    const int loaded = widest_vector_load(program, space);
    if (loaded < 0) return 1;
    widest = std::max(widest, loaded);
  }
  for (DType dt : program.output_dtypes) widest = std::max(widest, dtype_size(dt));
  return 16 / widest;
}

std::string vector_loads_condition(const KernelProgram& program, const std::vector<int>& spaces,
                                   int last, int e, const std::string& joiner) {
  std::vector<std::string> pointers, conditions;
  for (size_t o = 0; o < program.output_dtypes.size(); ++o)
    pointers.push_back(absl::StrCat("(u64)a.out[", o, "]"));
  for (const Instr& in : program.instrs) {
    if (in.kind != InstrKind::kLoad ||
        std::find(spaces.begin(), spaces.end(), in.space) == spaces.end()) {
      continue;
    }
    pointers.push_back(absl::StrCat("(u64)a.in[", in.input, "]"));
    std::string c = absl::StrCat("a.stride[", in.view, "][", last, "] == 1 && a.offset[", in.view,
                                 "] % ", e, " == 0");
    for (int d = 0; d < last; ++d)
      absl::StrAppend(&c, " && a.stride[", in.view, "][", d, "] % ", e, " == 0");
    conditions.push_back(c);
  }
  conditions.insert(conditions.begin(),
                    absl::StrCat("((", absl::StrJoin(pointers, " | "), ") & 15) == 0"));
  return absl::StrJoin(conditions, joiner);
}

SteppedLoop stepped_loop(const KernelWriter& writer, int space, int e, const std::string& idx) {
  const int rank = writer.rank(space);
  const int last = rank - 1;
  auto dim = [&](int d) { return absl::StrCat("(I)a.shape[", space, "][", d, "]"); };
  const std::string step = absl::StrCat(idx, "_step");
  SteppedLoop loop;
  absl::StrAppend(
      &loop.open, "    const I groups = ", writer.numel(space), " / ", e, ";\n",
      "    const I first = (I)blockIdx.x * (I)blockDim.x + threadIdx.x;\n",
      "    const I stride = (I)gridDim.x * (I)blockDim.x;\n",
      "    // The multi-index of the thread's first group and the grid stride's digits\n",
      "    // (the innermost dim counted in elements). An empty space has no digits.\n", "    I ",
      idx, "[", writer.index_rank(), "] = {0}, ", step, "[", writer.index_rank(), "] = {0};\n",
      "    if (first < groups) {\n", "      I rest = first, stride_rest = stride;\n");
  for (int d = last; d > 0; --d) {
    const std::string extent = d == last && e > 1 ? absl::StrCat(dim(d), " / ", e) : dim(d);
    const std::string times = d == last && e > 1 ? absl::StrCat(" * ", e) : "";
    absl::StrAppend(&loop.open, "      { const I n = ", extent, "; ", idx, "[", d, "] = rest % n",
                    times, "; rest /= n; ", step, "[", d, "] = stride_rest % n", times,
                    "; stride_rest /= n; }\n");
  }
  const std::string times0 = last == 0 && e > 1 ? absl::StrCat(" * ", e) : "";
  absl::StrAppend(&loop.open, "      ", idx, "[0] = rest", times0, ";\n      ", step,
                  "[0] = stride_rest", times0, ";\n    }\n",
                  "    for (I g = first; g < groups; g += stride) {\n");
  // The next group's multi-index: the stride's digits added with carries. Each digit stays
  // below its extent, so one subtraction carries; the outermost digit just grows.
  absl::StrAppend(&loop.close, "      // Step to the thread's next group.\n");
  if (last == 0) {
    absl::StrAppend(&loop.close, "      ", idx, "[0] += ", step, "[0];\n");
  } else {
    absl::StrAppend(&loop.close, "      {\n        I carry = 0;\n");
    for (int d = last; d >= 0; --d) {
      absl::StrAppend(&loop.close, "        ", idx, "[", d, "] += ", step, "[", d, "] + carry;\n");
      if (d > 0) {
        absl::StrAppend(&loop.close, "        carry = ", idx, "[", d, "] >= ", dim(d),
                        " ? 1 : 0;\n", "        if (carry) ", idx, "[", d, "] -= ", dim(d), ";\n");
      }
    }
    absl::StrAppend(&loop.close, "      }\n");
  }
  absl::StrAppend(&loop.close, "    }\n");
  return loop;
}

std::string vector_epilogue(const KernelWriter& writer, int e, const std::string& values,
                            const std::string& index, const std::string& flat) {
  const KernelProgram& program = writer.program();
  const int last = writer.rank(0) - 1;
  // Lane e's anchor value and multi-index (the group's first one, moved e along the
  // innermost dim), then space 0's code at it.
  std::string lane =
      absl::StrCat("      const ", register_type(program.anchor_dtype), " anchor_value = ",
                   cast(program.anchor_dtype, program.anchor_dtype, absl::StrCat(values, "[e]")),
                   ";\n", "      I idx0[", writer.index_rank(), "] = {0};\n");
  for (int d = 0; d < writer.rank(0); ++d)
    absl::StrAppend(&lane, "      idx0[", d, "] = ", index, "[", d, "];\n");
  absl::StrAppend(&lane, "      idx0[", last, "] += e;\n      (void)idx0;\n",
                  writer.space_code(0, "idx0"));
  return writer.vector_stores(e, lane, flat, KernelWriter::PackOffset::kElements, "      ");
}

namespace {

// One pass over the output in groups of `e` elements along the innermost dim (e = 1: one
// element at a time, through the operands' views). Each group takes the operand that covers
// its position along the axis; the vector path's condition keeps a group inside one operand.
std::string concat_loop(const KernelWriter& writer, int e) {
  const KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const std::string t = register_type(program.anchor_dtype);
  const SteppedLoop loop = stepped_loop(writer, 0, e, "out");
  std::string s = absl::StrCat(loop.open, "      ", t, " value[", e, "] = {0};\n      I pos = out[",
                               axis, "];\n      bool found = false;\n");
  for (size_t k = 0; k < program.anchor_operands.size(); ++k) {
    const int space = static_cast<int>(k) + 1;
    const std::string idx = absl::StrCat("idx", space);
    absl::StrAppend(&s, "      if (!found && pos < (I)a.shape[", space, "][", axis,
                    "]) {\n      I ", idx, "[", writer.index_rank(),
                    "];\n      for (int d = 0; d < ", writer.index_rank(), "; ++d) ", idx,
                    "[d] = out[d];\n      ", idx, "[", axis, "] = pos;\n");
    if (e > 1) {
      absl::StrAppend(&s, writer.vector_loads(space, e, idx, "      "), "      #pragma unroll\n",
                      "      for (int e = 0; e < ", e, "; ++e) {\n",
                      writer.space_code(space, "", "e"), "      value[e] = (", t, ")v",
                      program.anchor_operands[k], ";\n      }\n");
    } else {
      absl::StrAppend(&s, writer.space_code(space, idx), "      value[0] = (", t, ")v",
                      program.anchor_operands[k], ";\n");
    }
    absl::StrAppend(&s,
                    "      found = true;\n      } else if (!found) {\n        pos -= (I)a.shape[",
                    space, "][", axis, "];\n      }\n");
  }
  if (e > 1) {
    absl::StrAppend(&s, vector_epilogue(writer, e, "value", "out", absl::StrCat("g * ", e)));
  } else {
    absl::StrAppend(&s, writer.epilogue("value[0]", "g", "out"));
  }
  return s + loop.close;
}

}  // namespace

// A thread per group of output elements (grid-stride, the multi-index stepped), each group
// read from the operand that covers its position along the axis. The groups are 16-byte
// vectors when every operand's loads are contiguous along the innermost dim and aligned, the
// innermost dim holds whole vectors and, for a concat along it, so does every operand's
// share (checked once per launch); single elements otherwise.
std::string render_concat(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  const int axis = program.anchor_attrs.axis;
  const int last = writer.rank(0) - 1;
  std::vector<int> spaces;
  for (size_t k = 0; k < program.anchor_operands.size(); ++k) {
    spaces.push_back(static_cast<int>(k) + 1);
  }
  const int e = element_group_width(program, spaces);
  if (e <= 1) return absl::StrCat("  {\n", concat_loop(writer, 1), "  }\n");
  std::string condition =
      absl::StrCat(vector_loads_condition(program, spaces, last, e, " &&\n      "),
                   " &&\n      a.shape[0][", last, "] % ", e, " == 0");
  if (axis == last) {
    for (int space : spaces)
      absl::StrAppend(&condition, " && a.shape[", space, "][", last, "] % ", e, " == 0");
  }
  return absl::StrCat("  const bool vectorizable = ", condition, ";\n",
                      "  if (vectorizable) {\n    // 16-byte groups of ", e, " elements.\n",
                      concat_loop(writer, e), "  } else {\n    // One element at a time.\n",
                      concat_loop(writer, 1), "  }\n");
}

}  // namespace kiln::runtime::cuda
