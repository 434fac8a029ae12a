#include "jit/fusion/planner.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "jit/fusion/short_sum.h"
#include "kiln/error.h"

namespace kiln::jit {
namespace {

using ops::OpClass;

bool is_elementwise(ops::OpKind op) {
  OpClass c = ops::op_class(op);
  return c == OpClass::kUnary || c == OpClass::kBinary || c == OpClass::kWhere ||
         c == OpClass::kCast || c == OpClass::kCustom;
}

// Nodes a kernel computes inline wherever they are read (elementwise ops, leaves, views and
// gathers), as opposed to anchors and inputs.
bool is_expression(ops::OpKind op) {
  const OpClass c = ops::op_class(op);
  return op != ops::OpKind::Input && (is_elementwise(op) || c == OpClass::kLeaf ||
                                      c == OpClass::kView || c == OpClass::kGather);
}

class Planner {
 public:
  Planner(const Trace& trace, const std::vector<int>& forced,
          const std::vector<FusedAttention>& attention)
      : trace_(trace) {
    const size_t n = trace_.nodes.size();
    plan_.attention = attention;
    in_score_space_.assign(n, false);
    for (const FusedAttention& f : attention) {
      in_score_space_[f.raw_scores] = true;
      for (int s : f.score_nodes) in_score_space_[s] = true;
    }
    unrolled_.assign(n, false);
    for (size_t i = 0; i < n; ++i) unrolled_[i] = is_unrolled_sum(trace_, static_cast<int>(i));
    plan_.materialized.assign(n, false);
    plan_.reasons.assign(n, "");
    users_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      for (int a : trace_.nodes[i].args) {
        if (users_[a].empty() || users_[a].back() != static_cast<int>(i)) users_[a].push_back(i);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (trace_.nodes[i].op == ops::OpKind::Input) materialize(i, "input");
    }
    for (int o : trace_.outputs) materialize(o, "output");
    // Ops that need buffers around them, each for its own reason.
    for (size_t i = 0; i < n; ++i) {
      const TraceNode& node = trace_.nodes[i];
      if (node.op == ops::OpKind::CustomKernel) {
        // A custom kernel reads dense buffers and writes its own: nothing fuses either side.
        materialize(i, "a custom kernel's result");
        for (int a : node.args) materialize(a, "a custom kernel reads it as a dense buffer");
      } else if (ops::op_class(node.op) == OpClass::kCollective) {
        // Other processes send and receive whole buffers: a fusion boundary on both sides.
        materialize(i, "a collective's result (fusion boundary: it comes from other processes)");
        // recv's operand only gives its type: nothing computes it.
        if (node.op != ops::OpKind::Recv) {
          materialize(node.args[0],
                      "a collective sends it whole to other processes (fusion boundary)");
        }
      } else if (ops::op_class(node.op) == OpClass::kGather) {
        // A gather reads x at positions known only when it runs: x must be a buffer.
        materialize(node.args[0], "a gather reads it at data-dependent positions");
      } else if (node.op == ops::OpKind::Contiguous) {
        materialize(i, "contiguous() gives it a row-major buffer of its own");
      } else if (node.op == ops::OpKind::UpdateSlice) {
        // Its kernel writes only the update's elements, into x's buffer (or a copy of it).
        materialize(i, "update_slice writes into a buffer that starts as x");
        materialize(node.args[0], "update_slice writes its update into x's buffer (or a copy)");
        if (node.args.size() == 3) {
          materialize(node.args[2], "update_slice reads its start from a buffer when it runs");
        }
      } else if (node.op == ops::OpKind::IndexAdd) {
        // Its kernel adds the source's elements into a copy of x, at positions read from a
        // buffer when it runs.
        materialize(i, "index_add adds into a buffer that starts as x");
        materialize(node.args[0], "index_add adds its source into a copy of x");
        materialize(node.args[2], "index_add reads its indices from a buffer when it runs");
      }
    }
    for (int f : forced)
      materialize(f, "its users index it through a reshape that strides cannot express");
  }

  FusionPlan run() {
    decide_recomputation();
    limit_kernel_size();
    decide_anchors();
    while (!build_groups()) {
    }
    return std::move(plan_);
  }

 private:
  void materialize(int node, const std::string& why) {
    if (plan_.materialized[node]) return;
    const TraceNode& n = trace_.nodes[node];
    if (is_block_quantized(n.type->dtype) && n.op != ops::OpKind::Input) {
      // Only whole rows of blocks can be stored (jit/api/block_views.h); a permuted weight
      // is read in place by the matmul or take that uses it, never written.
      throw Error(absl::StrCat("[", ops::op_name(n.op), "] cannot store a view of a ",
                               dtype_name(n.type->dtype), " tensor that is not whole rows (", why,
                               "): astype the tensor to f32 first"));
    }
    plan_.materialized[node] = true;
    plan_.reasons[node] = why;
  }
  bool is_materialized(int node) const { return plan_.materialized[node]; }
  // An anchor's kind, none for a sum computed as an expression (jit/fusion/short_sum.h).
  AnchorKind anchor_at(size_t node) const {
    return unrolled_[node] ? AnchorKind::kNone : anchor_kind(trace_.nodes[node].op);
  }
  // How many times node's kernel computes its arguments per element: an unrolled sum's
  // terms, else 1.
  int64_t terms(size_t node) const {
    if (!unrolled_[node]) return 1;
    const TraceNode& n = trace_.nodes[node];
    return ops::numel(trace_.nodes[n.args[0]].type->shape) / ops::numel(n.type->shape);
  }
  bool expression(size_t node) const {
    return unrolled_[node] || is_expression(trace_.nodes[node].op);
  }
  const ops::Shape& shape(int node) const { return trace_.nodes[node].type->shape; }

  // Expression nodes used by several consumers are stored when recomputing them is costly.
  void decide_recomputation() {
    std::vector<int64_t> cost(trace_.nodes.size(), 0);
    for (size_t i = 0; i < trace_.nodes.size(); ++i) {
      if (!expression(i)) continue;
      // An unrolled sum computes its argument once per term.
      const int64_t times = terms(i);
      int64_t c = 1;
      for (int a : trace_.nodes[i].args) {
        if (!is_materialized(a) && expression(a))
          c = std::min<int64_t>(c + times * cost[a], 1 << 20);
      }
      cost[i] = c;
      if (!is_materialized(i) && users_[i].size() >= 2 && c > kRecomputeLimit) {
        materialize(i, absl::StrCat("used by ", users_[i].size(),
                                    " consumers; recomputing it costs ", c, " ops each"));
      }
    }
  }

  // A node's kernel reads the sources and fuses the ops of its unstored producers. Where a
  // node would bring more than the bounds into one kernel, its largest unstored producer is
  // stored instead (counts add over arguments, so shared producers count twice: the bound
  // holds all the more). An anchor's value that reaches a boundary (another anchor, a view,
  // a broadcast) will be stored there by decide_anchors, so it counts as one buffer read,
  // not as everything upstream of it: otherwise the counts of a deep network grow layer by
  // layer and identical layers get different plans.
  void limit_kernel_size() {
    const size_t n = trace_.nodes.size();
    std::vector<int64_t>& sources = sources_;
    sources.assign(n, 0);
    std::vector<int64_t> fused(n, 0);
    // Whether an anchor's value flows into node i through the elementwise ops fused with it.
    std::vector<bool> carries(n, false);
    auto stored_at = [&](size_t i, int a) {
      const TraceNode& node = trace_.nodes[i];
      return carries[a] && (anchor_at(i) != AnchorKind::kNone || !is_elementwise(node.op) ||
                            shape(a) != shape(static_cast<int>(i)));
    };
    // Counts the buffers node i's kernel would read and the ops it would fuse.
    auto count_kernel_size = [&](size_t i) {
      const TraceNode& node = trace_.nodes[i];
      int64_t s = node.param_slot >= 0 ? 1 : 0, f = 1;
      bool carried = anchor_at(i) != AnchorKind::kNone;
      for (int a : node.args) {
        const bool read = is_materialized(a) || stored_at(i, a);
        s += read ? 1 : sources[a];
        f += read ? 0 : terms(i) * fused[a];  // an unrolled sum fuses its argument per term
        carried = carried || (!read && carries[a]);
      }
      sources[i] = std::min<int64_t>(s, 1 << 20);
      fused[i] = std::min<int64_t>(f, 1 << 20);
      carries[i] = carried && !is_materialized(static_cast<int>(i));
    };
    for (size_t i = 0; i < n; ++i) {
      if (trace_.nodes[i].op == ops::OpKind::Input) continue;
      count_kernel_size(i);
      while (sources[i] > kMaxKernelSources || fused[i] > kMaxFusedOps) {
        int largest = -1;
        for (int a : trace_.nodes[i].args) {
          if (is_materialized(a) || stored_at(i, a) || (sources[a] <= 1 && fused[a] <= 1)) {
            continue;
          }
          if (largest < 0 || sources[a] + fused[a] > sources[largest] + fused[largest]) largest = a;
        }
        if (largest < 0) break;  // only stored arguments left: nothing smaller to split off
        materialize(largest,
                    absl::StrCat("its consumer's kernel would read more than ", kMaxKernelSources,
                                 " buffers or fuse more than ", kMaxFusedOps, " ops"));
        count_kernel_size(i);
      }
    }
  }

  // Which anchors each expression carries toward its stores (see planner.h).
  std::vector<int> live_carried(int node) const {
    std::vector<int> out;
    for (int r : carried_[node]) {
      if (!is_materialized(r)) out.push_back(r);
    }
    return out;
  }

  // Anchors absorb their same-shape elementwise consumers. Where a carried anchor's value
  // meets a boundary (a view, a broadcast, another anchor's operand, a second anchor), the
  // value at the boundary is stored: it becomes an epilogue store of the anchor's kernel.
  void decide_anchors() {
    carried_.assign(trace_.nodes.size(), {});
    for (size_t i = 0; i < trace_.nodes.size(); ++i) {
      const TraceNode& node = trace_.nodes[i];
      const std::string at = absl::StrCat(" at node ", i, " (", ops::op_name(node.op), ")");
      const bool is_anchor = anchor_at(i) != AnchorKind::kNone;
      if (in_score_space_[i]) {
        // Computed per score inside an attention kernel: it carries nothing, and what it
        // reads besides q·kᵀ and the other score ops (a mask) must not carry an anchor.
        for (int a : node.args) {
          if (is_materialized(a) || in_score_space_[a] || is_anchor) continue;
          if (!live_carried(a).empty()) materialize(a, "an attention's scores read it" + at);
        }
        continue;
      }
      for (int a : node.args) {
        if (is_materialized(a)) continue;  // read from memory, not fused
        std::vector<int> from = live_carried(a);
        if (from.empty()) continue;
        if (is_anchor) {
          materialize(a, "it feeds another anchor" + at);
        } else if (!is_elementwise(node.op)) {
          const char* why = unrolled_[i]                                 ? "it is summed"
                            : ops::op_class(node.op) == OpClass::kGather ? "it is gathered"
                                                                         : "it is viewed";
          materialize(a, why + at);
        } else if (shape(a) != shape(i)) {
          materialize(a, "it is broadcast to a larger iteration space" + at);
        } else if (!carried_[i].empty() && carried_[i][0] != from[0]) {
          materialize(a, "another anchor's result meets it" + at);
        } else {
          carried_[i] = from;
        }
      }
      if (is_anchor && !is_materialized(i)) carried_[i] = {static_cast<int>(i)};
    }
  }

  // The anchor whose kernel computes expression store `node`, or -1.
  int anchor_of(int node) {
    // Recompute over the final materialization: follow same-shape elementwise args.
    if (!anchor_memo_.contains(node)) {
      int result = -1;
      const TraceNode& n = trace_.nodes[node];
      if (anchor_at(node) != AnchorKind::kNone) {
        result = node;
      } else if (is_elementwise(n.op)) {
        for (int a : n.args) {
          if (is_materialized(a) || shape(a) != shape(node)) continue;
          int r = anchor_of(a);
          if (r >= 0) result = std::max(result, r);
        }
      }
      anchor_memo_[node] = result;
    }
    return anchor_memo_[node];
  }

  // Materialized nodes a group reads, found by walking its unmaterialized producers.
  void collect_sources(int node, absl::flat_hash_set<int>& seen, std::vector<int>& sources) {
    std::vector<int> stack{node};
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      for (int a : trace_.nodes[n].args) {
        if (!seen.insert(a).second) continue;
        if (is_materialized(a)) {
          sources.push_back(a);
        } else {
          stack.push_back(a);
        }
      }
    }
  }

  // Forms the groups and orders them; false when a cycle forced a new materialization.
  bool build_groups() {
    anchor_memo_.clear();
    std::vector<KernelGroup> groups;
    std::vector<int> group_of(trace_.nodes.size(), -1);  // producing group per materialized node
    absl::flat_hash_map<int, int> group_of_anchor;
    std::vector<std::vector<int>> sources;            // per group
    absl::flat_hash_map<int, int64_t> group_sources;  // per group, an upper bound on its reads
    absl::flat_hash_map<std::vector<int64_t>, int> last_pointwise;  // shape -> group
    for (size_t i = 0; i < trace_.nodes.size(); ++i) {
      if (!is_materialized(i) || trace_.nodes[i].op == ops::OpKind::Input) continue;
      const int anchor = anchor_of(static_cast<int>(i));
      absl::flat_hash_set<int> seen{static_cast<int>(i)};
      std::vector<int> src;
      collect_sources(static_cast<int>(i), seen, src);
      int g = -1;
      if (anchor >= 0 && group_of_anchor.contains(anchor)) {
        g = group_of_anchor[anchor];
      } else if (anchor < 0) {
        auto it = last_pointwise.find(shape(i));
        if (it != last_pointwise.end()) {
          bool fits = group_sources[it->second] + sources_[i] <= kMaxKernelSources;
          for (int s : src)
            fits = fits && (trace_.nodes[s].op == ops::OpKind::Input || group_of[s] < it->second);
          if (fits) g = it->second;
        }
      }
      if (g < 0) {
        g = static_cast<int>(groups.size());
        KernelGroup group;
        group.anchor = anchor >= 0 ? anchor_kind(trace_.nodes[anchor].op) : AnchorKind::kNone;
        group.anchor_node = anchor;
        groups.push_back(group);
        sources.emplace_back();
        if (anchor >= 0) group_of_anchor[anchor] = g;
      }
      for (int source : src) {
        if (group_of[source] == g) {  // it would read what its own kernel writes
          materialize(groups[g].anchor_node, "a store of its kernel reads another store of it");
          return false;
        }
      }
      if (anchor < 0) last_pointwise[shape(i)] = g;
      group_sources[g] += sources_[i];
      groups[g].stores.push_back(static_cast<int>(i));
      group_of[i] = g;
      sources[g].insert(sources[g].end(), src.begin(), src.end());
    }
    return order_groups(std::move(groups), group_of, sources);
  }

  // Kahn's algorithm over group dependencies, lowest index first.
  bool order_groups(std::vector<KernelGroup> groups, const std::vector<int>& group_of,
                    const std::vector<std::vector<int>>& sources) {
    const size_t g = groups.size();
    std::vector<std::vector<int>> users(g);
    std::vector<int> waiting(g, 0);
    for (size_t k = 0; k < g; ++k) {
      absl::flat_hash_set<int> deps;
      for (int s : sources[k]) {
        int producer = group_of[s];
        if (producer >= 0 && producer != static_cast<int>(k) && deps.insert(producer).second) {
          users[producer].push_back(k);
          ++waiting[k];
        }
      }
    }
    std::vector<int> ready, order;
    for (size_t k = 0; k < g; ++k) {
      if (waiting[k] == 0) ready.push_back(k);
    }
    while (!ready.empty()) {
      std::sort(ready.begin(), ready.end(), std::greater<>());
      int k = ready.back();
      ready.pop_back();
      order.push_back(k);
      for (int u : users[k]) {
        if (--waiting[u] == 0) ready.push_back(u);
      }
    }
    if (order.size() != g) {  // a cycle through an anchored group: store its anchor
      for (size_t k = 0; k < g; ++k) {
        if (waiting[k] > 0 && groups[k].anchor_node >= 0) {
          materialize(groups[k].anchor_node,
                      "storing it breaks a dependency cycle between kernels");
          return false;
        }
      }
      throw Error("internal error: the fusion planner made a cycle of pointwise kernels");
    }
    for (int k : order) plan_.groups.push_back(std::move(groups[k]));
    return true;
  }

  std::vector<int64_t> sources_;  // per node: buffers and scalars its kernel reads (bound)
  const Trace& trace_;
  FusionPlan plan_;
  std::vector<std::vector<int>> users_;    // distinct users per node
  std::vector<std::vector<int>> carried_;  // anchors carried per node
  std::vector<bool> in_score_space_;       // per node: computed per score in an attention
  std::vector<bool> unrolled_;             // per node: a short sum computed as an expression
  absl::flat_hash_map<int, int> anchor_memo_;
};

}  // namespace

AnchorKind anchor_kind(ops::OpKind op) {
  switch (ops::op_class(op)) {
    case OpClass::kReduce:
      return AnchorKind::kReduce;
    case OpClass::kArgReduce:
      return AnchorKind::kArgReduce;
    case OpClass::kRowNorm:  // cumsum and topk_indices share the row ops' class, not their kernels
      if (op == ops::OpKind::Cumsum) return AnchorKind::kScan;
      if (op == ops::OpKind::TopkIndices) return AnchorKind::kTopk;
      return AnchorKind::kRowNorm;
    case OpClass::kMatmul:
      return AnchorKind::kMatmul;
    case OpClass::kConcat:
      return AnchorKind::kConcat;
    case OpClass::kCustomKernel:
      return AnchorKind::kCustomKernel;
    case OpClass::kUpdateSlice:
      if (op == ops::OpKind::IndexAdd) return AnchorKind::kIndexAdd;
      return AnchorKind::kUpdateSlice;
    case OpClass::kAttention:
      return AnchorKind::kAttention;
    case OpClass::kCollective:
      return AnchorKind::kCollective;
    case OpClass::kLeaf:
    case OpClass::kUnary:
    case OpClass::kBinary:
    case OpClass::kWhere:
    case OpClass::kCast:
    case OpClass::kView:
    case OpClass::kCustom:
    case OpClass::kGather:
      return AnchorKind::kNone;
  }
  return AnchorKind::kNone;  // not reached: every class is named above
}

FusionPlan plan_fusion(const Trace& trace, const std::vector<int>& forced,
                       const std::vector<FusedAttention>& attention) {
  return Planner(trace, forced, attention).run();
}

}  // namespace kiln::jit
