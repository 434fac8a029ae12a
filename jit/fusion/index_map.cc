// Index maps (index_map.h): an identity map, a map as a view's strides, and how a map
// follows a value back through broadcasts, views (reshape, broadcast_to, permute, slice,
// contiguous) and gathers.
#include "jit/fusion/index_map.h"

#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "ops/op_catalog.h"

namespace kiln::jit {

using ops::OpKind;
using ops::Shape;

IndexMap IndexMap::identity(size_t rank) {
  IndexMap m;
  for (size_t j = 0; j < rank; ++j) {
    m.src.push_back(static_cast<int>(j));
    m.scale.push_back(1);
    m.base.push_back(0);
  }
  return m;
}

ViewParams IndexMap::to_view(const Shape& shape, size_t space_rank) const {
  ViewParams v;
  if (flat) {
    v.strides = strides;
    v.offset = offset;
    return v;
  }
  std::vector<int64_t> contiguous = ops::contiguous_strides(shape);
  v.strides.assign(space_rank, 0);
  for (size_t j = 0; j < src.size(); ++j) {
    if (src[j] >= 0) v.strides[src[j]] += contiguous[j] * scale[j];
    v.offset += contiguous[j] * base[j];
  }
  return v;
}

std::vector<int64_t> IndexMap::key() const {
  std::vector<int64_t> k{flat};
  if (flat) {
    k.insert(k.end(), strides.begin(), strides.end());
    k.push_back(offset);
  } else {
    k.insert(k.end(), src.begin(), src.end());
    k.insert(k.end(), scale.begin(), scale.end());
    k.insert(k.end(), base.begin(), base.end());
  }
  return k;
}

IndexMap broadcast_map(const IndexMap& map, const Shape& from, const Shape& to, int node) {
  if (from == to) return map;
  if (map.flat) throw NeedsMaterialization{node};
  IndexMap r;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    size_t j = offset + i;
    bool stretched = from[i] == 1 && to[j] != 1;
    r.src.push_back(stretched ? -1 : map.src[j]);
    r.scale.push_back(stretched ? 0 : map.scale[j]);
    r.base.push_back(stretched ? 0 : map.base[j]);
  }
  return r;
}

IndexMap summed_term_map(const IndexMap& map, const Shape& from, const std::vector<int>& axes,
                         bool keepdims, const std::vector<int64_t>& position, int node) {
  if (map.flat) throw NeedsMaterialization{node};
  IndexMap r;
  size_t reduced = 0, kept = 0;  // axes passed; the sum's dims used
  for (size_t d = 0; d < from.size(); ++d) {
    if (reduced < axes.size() && axes[reduced] == static_cast<int>(d)) {
      r.src.push_back(-1);  // fixed at this term's position
      r.scale.push_back(0);
      r.base.push_back(position[reduced++]);
      if (keepdims) ++kept;  // the sum's size-1 dim stands here
      continue;
    }
    r.src.push_back(map.src[kept]);
    r.scale.push_back(map.scale[kept]);
    r.base.push_back(map.base[kept]);
    ++kept;
  }
  return r;
}

IndexMap view_argument_map(const TraceNode& view, int node, const Shape& from, size_t space_rank,
                           const IndexMap& map) {
  const Shape& to = view.type->shape;
  const ops::Attrs& attrs = *view.attrs;
  switch (view.op) {
    case OpKind::Reshape: {
      if (map.flat) return map;
      // Inserting or removing size-1 dims (unsqueeze, squeeze) keeps the multi-index form.
      std::vector<size_t> out_dims, in_dims;
      for (size_t j = 0; j < to.size(); ++j) {
        if (to[j] != 1) out_dims.push_back(j);
      }
      for (size_t j = 0; j < from.size(); ++j) {
        if (from[j] != 1) in_dims.push_back(j);
      }
      bool unit_dims_only = in_dims.size() == out_dims.size();
      for (size_t k = 0; unit_dims_only && k < in_dims.size(); ++k) {
        unit_dims_only = from[in_dims[k]] == to[out_dims[k]];
      }
      if (unit_dims_only) {
        IndexMap r;
        r.src.assign(from.size(), -1);
        r.scale.assign(from.size(), 0);
        r.base.assign(from.size(), 0);
        for (size_t k = 0; k < in_dims.size(); ++k) {
          r.src[in_dims[k]] = map.src[out_dims[k]];
          r.scale[in_dims[k]] = map.scale[out_dims[k]];
          r.base[in_dims[k]] = map.base[out_dims[k]];
        }
        return r;
      }
      ViewParams v = map.to_view(to, space_rank);
      IndexMap f;
      f.flat = true;
      f.strides = v.strides;
      f.offset = v.offset;
      return f;
    }
    case OpKind::BroadcastTo:
      return broadcast_map(map, from, to, node);
    case OpKind::Permute: {
      bool identity = true;
      for (size_t j = 0; j < attrs.axes.size(); ++j)
        identity &= attrs.axes[j] == static_cast<int>(j);
      if (identity) return map;
      if (map.flat) throw NeedsMaterialization{node};
      IndexMap r = map;
      for (size_t j = 0; j < attrs.axes.size(); ++j) {
        int axis = attrs.axes[j];
        r.src[axis] = map.src[j];
        r.scale[axis] = map.scale[j];
        r.base[axis] = map.base[j];
      }
      return r;
    }
    case OpKind::Contiguous:
      return map;
    case OpKind::Slice: {
      int axis = attrs.axis;
      if (attrs.step == 1 && attrs.start == 0 && attrs.stop == from[axis]) return map;
      if (map.flat) {
        // A unit-step slice with only size-1 dims before it is a contiguous sub-range.
        bool leading = attrs.step == 1;
        for (int d = 0; d < axis; ++d) leading &= from[d] == 1;
        if (!leading) throw NeedsMaterialization{node};
        IndexMap r = map;
        r.offset += attrs.start * ops::contiguous_strides(from)[axis];
        return r;
      }
      IndexMap r = map;
      r.scale[axis] = map.scale[axis] * attrs.step;
      r.base[axis] = map.base[axis] * attrs.step + attrs.start;
      return r;
    }
      KILN_LEAF_OPS(KILN_OP_CASE)
      KILN_UNARY_OPS(KILN_OP_CASE)
      KILN_BINARY_OPS(KILN_OP_CASE)
      KILN_STRUCTURED_OPS(KILN_OP_CASE)
      break;
  }
  throw std::logic_error(absl::StrCat("internal error: ", ops::op_name(view.op), " is not a view"));
}

GatherMaps gather_maps(const TraceNode& gather, int node, const Shape& x_shape,
                       const Shape& index_shape, const IndexMap& map) {
  if (map.flat) throw NeedsMaterialization{node};
  const int axis = gather.attrs->axis;
  const int rank = static_cast<int>(x_shape.size());
  GatherMaps maps;
  auto follow = [&](IndexMap& r, int j) {  // r's next dim follows the node's dim j
    r.src.push_back(map.src[j]);
    r.scale.push_back(map.scale[j]);
    r.base.push_back(map.base[j]);
  };
  auto fixed = [](IndexMap& r) {  // r's next dim stays at 0 (the gathered axis, a broadcast)
    r.src.push_back(-1);
    r.scale.push_back(0);
    r.base.push_back(0);
  };
  if (gather.op == OpKind::DynamicSlice) {
    // One start for every element (a broadcast scalar); x's view walks the slice itself,
    // so the start's position moves the whole window.
    for (size_t i = 0; i < index_shape.size(); ++i) fixed(maps.indices);
    for (int d = 0; d < rank; ++d) follow(maps.x, d);
  } else if (gather.op == OpKind::Take) {
    const int index_rank = static_cast<int>(index_shape.size());
    for (int i = 0; i < index_rank; ++i) follow(maps.indices, axis + i);
    for (int d = 0; d < rank; ++d) {
      if (d == axis) {
        fixed(maps.x);
      } else {
        follow(maps.x, d < axis ? d : d - 1 + index_rank);
      }
    }
  } else {
    maps.indices = broadcast_map(map, index_shape, gather.type->shape, node);
    for (int d = 0; d < rank; ++d) {
      if (d == axis || (x_shape[d] == 1 && gather.type->shape[d] != 1)) {
        fixed(maps.x);
      } else {
        follow(maps.x, d);
      }
    }
  }
  return maps;
}

}  // namespace kiln::jit
