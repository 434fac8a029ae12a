#include "runtime/cuda/launch_geometry.h"

#include <algorithm>

namespace kiln::runtime::cuda {

int64_t grid_size(const jit::KernelProgram& p, const jit::KernelLaunch& l, int sm_count) {
  const int64_t cap = int64_t{sm_count} * 32;
  const int64_t out = ops::numel(l.spaces[0]);
  int64_t items = (out + 255) / 256;
  if (p.anchor == jit::AnchorKind::kReduce || p.anchor == jit::AnchorKind::kArgReduce) {
    items = out;
  } else if (p.anchor == jit::AnchorKind::kRowNorm) {
    const int64_t extent = l.spaces[1][p.anchor_attrs.axis];
    items = extent > 0 ? ops::numel(l.spaces[1]) / extent : 0;
  }
  return std::clamp<int64_t>(items, 1, cap);
}

int dynamic_shared_bytes(const jit::KernelProgram& p, const jit::KernelLaunch& l) {
  if (p.anchor != jit::AnchorKind::kRowNorm) return 0;
  // The cache holds the operand's register type: float for f16, bf16 and f32, else 8 bytes.
  const DType operand = p.instrs[p.anchor_operands[0]].dtype;
  const int64_t element = is_floating(operand) && operand != DType::F64 ? 4 : 8;
  const int64_t bytes = l.spaces[1][p.anchor_attrs.axis] * element;
  return bytes <= kDefaultSharedLimit ? static_cast<int>(bytes) : 0;
}

}  // namespace kiln::runtime::cuda
