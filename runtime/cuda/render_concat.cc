#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::KernelProgram;

// One thread per output element: the operand that covers its position along the axis.
std::string render_concat(const KernelWriter& w) {
  const KernelProgram& p = w.program();
  std::string s;
  const int axis = p.anchor_attrs.axis;
  const std::string t = register_type(p.anchor_dtype);
  absl::StrAppend(&s, "  const I total = ", w.numel(0), ";\n",
                  "  for (I i = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += "
                  "(I)gridDim.x * (I)blockDim.x) {\n    ",
                  w.unravel(0, "out", "i"), "    ", t, " value = 0;\n    I pos = out[", axis,
                  "];\n    bool found = false;\n");
  for (size_t k = 0; k < p.anchor_operands.size(); ++k) {
    const int space = static_cast<int>(k) + 1;
    const std::string idx = absl::StrCat("idx", space);
    absl::StrAppend(&s, "    if (!found && pos < (I)a.shape[", space, "][", axis, "]) {\n      I ",
                    idx, "[", w.index_rank(), "];\n      for (int d = 0; d < ", w.index_rank(),
                    "; ++d) ", idx, "[d] = out[d];\n      ", idx, "[", axis, "] = pos;\n",
                    w.space_code(space, idx), "      value = (", t, ")v", p.anchor_operands[k],
                    ";\n      found = true;\n    } else if (!found) {\n      pos -= (I)a.shape[",
                    space, "][", axis, "];\n    }\n");
  }
  absl::StrAppend(&s, w.epilogue("value", "i"), "  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
