// Index maps: how a kernel's iteration space indexes a trace node's elements, and how that
// map follows a value back through broadcasts, views and gathers to the values they read.
// Lowering (jit/fusion/lowering.cc) walks each store back through the graph with one of
// these and turns the map at a load into a view's strides and offset.
#ifndef KILN_JIT_FUSION_INDEX_MAP_H_
#define KILN_JIT_FUSION_INDEX_MAP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "jit/fusion/kernel_ir.h"
#include "jit/fusion/trace.h"
#include "ops/value_type.h"

namespace kiln::jit {

// How the current space indexes a node: either its multi-index, each dim an affine function
// of at most one space dim (src < 0: constant), or directly its flat index.
struct IndexMap {
  bool flat = false;
  std::vector<int> src;
  std::vector<int64_t> scale, base;  // multi form, per node dim
  std::vector<int64_t> strides;      // flat form, per space dim
  int64_t offset = 0;

  static IndexMap identity(size_t rank);
  // The flat index into a contiguous value of `shape`, over a space of rank `space_rank`.
  ViewParams to_view(const ops::Shape& shape, size_t space_rank) const;
  // Equal keys mean equal maps (lowering memoizes values by map).
  std::vector<int64_t> key() const;
};

// Thrown where strides cannot express the map a view needs (a permute, slice or broadcast of
// a reshaped value, a gather in a flat map): `node` must be stored first.
struct NeedsMaterialization {
  int node;
};

// The map for an argument of shape `from` of trace node `node`, whose shape is `to` (the
// argument broadcast to it), given `map`, the node's own.
IndexMap broadcast_map(const IndexMap& map, const ops::Shape& from, const ops::Shape& to, int node);

// The map for one term of an unrolled sum (jit/fusion/short_sum.h), trace node `node`: its
// argument, of shape `from`, at `position` along the sum's sorted `axes` (one entry per
// axis), given `map`, the sum's own (with the reduced dims kept when `keepdims`).
IndexMap summed_term_map(const IndexMap& map, const ops::Shape& from, const std::vector<int>& axes,
                         bool keepdims, const std::vector<int64_t>& position, int node);

// The map for the argument (of shape `from`) of `view`, trace node `node`, given `map`, the
// view's own, over a space of rank `space_rank`.
IndexMap view_argument_map(const TraceNode& view, int node, const ops::Shape& from,
                           size_t space_rank, const IndexMap& map);

// A gather's two reads (take, take_along_axis, dynamic_slice; ops/gather.h): its indices
// through `indices`, and its x through `x`, which leaves the gathered axis (and x's broadcast
// dims) at 0 for the gathered position to move.
struct GatherMaps {
  IndexMap x;
  IndexMap indices;
};

// The maps for `gather`, trace node `node`, given `map`, the gather's own.
GatherMaps gather_maps(const TraceNode& gather, int node, const ops::Shape& x_shape,
                       const ops::Shape& index_shape, const IndexMap& map);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_INDEX_MAP_H_
