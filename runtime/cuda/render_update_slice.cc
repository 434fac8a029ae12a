// update_slice: a thread per element of the update (grid-stride), written at `start` along
// the axis into output 0, which already holds x (the backend's copy, or x's own buffer).
// Nothing else is touched, so a KV cache write costs the update's size, not the cache's.
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

std::string render_update_slice(const KernelWriter& w) {
  const jit::KernelProgram& p = w.program();
  return absl::StrCat("  const I start = (I)a.p[", p.anchor_param,
                      "];\n  const I count = ", w.numel(1), ";\n",
                      "  for (I i = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < count; i += "
                      "(I)gridDim.x * (I)blockDim.x) {\n    ",
                      w.unravel(1, "idx1", "i"), w.space_code(1, "idx1"), "    idx1[",
                      p.anchor_attrs.axis, "] += start;\n    const I flat = ", w.flatten(0, "idx1"),
                      ";\n", w.epilogue(absl::StrCat("v", p.anchor_operands[0]), "flat"), "  }\n");
}

}  // namespace kiln::runtime::cuda
