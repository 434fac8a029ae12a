#include "jit/fusion/family_geometry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/fusion/kernel_ir.h"

namespace kiln::jit {

std::string ViewPattern::to_string() const {
  std::string out = absl::StrCat("r", rank);
  switch (access) {
    case ViewAccess::kContiguous:
      return out + ":contiguous";
    case ViewAccess::kBroadcast:
      return absl::StrCat(out, ":broadcast(", absl::StrJoin(broadcast_dims, ","), ")");
    case ViewAccess::kStrided:
      return out + ":strided";
    case ViewAccess::kGathered:
      return out + ":gathered";
  }
  return out + ":?";
}

ViewPattern view_pattern(const ops::Shape& space, const ViewParams& view, int64_t source_numel) {
  std::vector<int64_t> contiguous = ops::contiguous_strides(space);
  bool is_contiguous = view.offset == 0 && ops::numel(space) == source_numel;
  ViewPattern p;
  p.rank = static_cast<int>(space.size());
  for (size_t d = 0; d < space.size(); ++d) {
    if (space[d] != 1 && view.strides[d] != contiguous[d]) is_contiguous = false;
    if (view.strides[d] == 0 && space[d] != 1) p.broadcast_dims.push_back(static_cast<int>(d));
  }
  if (is_contiguous) {
    p.access = ViewAccess::kContiguous;
    p.broadcast_dims.clear();
  } else {
    p.access = p.broadcast_dims.empty() ? ViewAccess::kStrided : ViewAccess::kBroadcast;
  }
  return p;
}

RowShape row_norm_shape(const KernelProgram& program, const KernelLaunch& launch) {
  const ops::Shape& shape = launch.spaces[1];
  const int axis = program.anchor_attrs.axis;
  RowShape r;
  r.extent = shape.empty() ? 1 : shape[axis];
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < axis) r.outer *= shape[d];
    if (d > axis) r.inner *= shape[d];
  }
  return r;
}

ReductionAxes reduction_axes(const KernelProgram& program, int rank) {
  const bool arg = program.anchor == AnchorKind::kArgReduce;
  const std::vector<int>& axes = program.anchor_attrs.axes;
  ReductionAxes r;
  for (int d = 0; d < rank; ++d) {
    const bool reduced =
        arg ? d == program.anchor_attrs.axis : std::find(axes.begin(), axes.end(), d) != axes.end();
    (reduced ? r.reduced : r.kept).push_back(d);
    r.is_reduced.push_back(reduced);
  }
  return r;
}

int64_t reduced_extent(const KernelLaunch& launch) {
  const int64_t outputs = ops::numel(launch.spaces[0]);
  return outputs > 0 ? ops::numel(launch.spaces[1]) / outputs : 0;
}

MatmulShape matmul_shape(const KernelLaunch& launch) {
  MatmulShape s;
  s.a = launch.spaces[1];
  s.b = launch.spaces[2];
  if (s.a.size() == 1) s.a.insert(s.a.begin(), 1);
  if (s.b.size() == 1) s.b.push_back(1);
  s.m = s.a[s.a.size() - 2];
  s.k = s.a.back();
  s.n = s.b.back();
  s.batches = s.m * s.n == 0 ? 0 : ops::numel(launch.spaces[0]) / (s.m * s.n);
  return s;
}

MatmulBatchOffsets matmul_batch_offsets(const MatmulShape& mm) {
  const int ra = static_cast<int>(mm.a.size()), rb = static_cast<int>(mm.b.size());
  const int out_batch_rank = std::max(ra, rb) - 2;
  // The output's batch shape, and each operand's element stride per output batch dim (0 where
  // the operand lacks the dim or broadcasts it).
  ops::Shape batch_shape(out_batch_rank, 1);
  std::vector<int64_t> stride_a(out_batch_rank, 0), stride_b(out_batch_rank, 0);
  auto place = [&](const ops::Shape& s, int64_t matrix, std::vector<int64_t>& strides) {
    const int r = static_cast<int>(s.size());
    int64_t stride = matrix;
    for (int j = r - 3; j >= 0; --j) {
      const int o = matmul_batch_dim(r, out_batch_rank, j);
      batch_shape[o] = std::max(batch_shape[o], s[j]);
      if (s[j] != 1) strides[o] = stride;
      stride *= s[j];
    }
  };
  place(mm.a, mm.m * mm.k, stride_a);
  place(mm.b, mm.k * mm.n, stride_b);
  MatmulBatchOffsets out;
  out.a.resize(mm.batches);
  out.b.resize(mm.batches);
  for (int64_t bi = 0; bi < mm.batches; ++bi) {
    int64_t rest = bi, oa = 0, ob = 0;
    for (int o = out_batch_rank - 1; o >= 0; --o) {
      const int64_t i = rest % batch_shape[o];
      rest /= batch_shape[o];
      oa += i * stride_a[o];
      ob += i * stride_b[o];
    }
    out.a[bi] = oa;
    out.b[bi] = ob;
  }
  return out;
}

}  // namespace kiln::jit
