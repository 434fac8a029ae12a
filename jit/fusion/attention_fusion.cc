#include "jit/fusion/attention_fusion.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ops/infer.h"

namespace kiln::jit {
namespace {

using ops::OpClass;
using ops::OpKind;

bool is_elementwise(OpKind op) {
  const OpClass c = ops::op_class(op);
  return c == OpClass::kUnary || c == OpClass::kBinary || c == OpClass::kWhere ||
         c == OpClass::kCast || c == OpClass::kCustom;
}

// Whether `node` is a permute that swaps the last two dims and keeps the others.
bool swaps_last_two(const TraceNode& node) {
  if (node.op != OpKind::Permute) return false;
  const std::vector<int>& axes = node.attrs->axes;
  const int r = static_cast<int>(axes.size());
  if (r < 2) return false;
  std::vector<int> want(r);
  std::iota(want.begin(), want.end(), 0);
  std::swap(want[r - 1], want[r - 2]);
  return axes == want;
}

class Matcher {
 public:
  explicit Matcher(const Trace& trace) : trace_(trace), users_(trace.nodes.size()) {
    for (size_t i = 0; i < trace.nodes.size(); ++i) {
      for (int a : trace.nodes[i].args) users_[a].push_back(static_cast<int>(i));
    }
    for (int o : trace.outputs) users_[o].push_back(-1);  // an output: read by the caller
  }

  // The fused attention ending at matmul `m`, or nullopt with a note saying why not (no note
  // when `m` is not a matmul of a softmax at all).
  std::optional<FusedAttention> match(int m, std::vector<std::string>& notes) {
    const TraceNode& mm = trace_.nodes[m];
    if (mm.op != OpKind::Matmul) return std::nullopt;
    const int softmax = mm.args[0];
    const TraceNode& s = trace_.nodes[softmax];
    if (s.op != OpKind::Softmax) return std::nullopt;
    const int rank = static_cast<int>(s.type->shape.size());
    auto not_fused = [&](const std::string& why) {
      notes.push_back(absl::StrCat("%", m, " (matmul of softmax %", softmax,
                                   ") is not fused into attention: ", why));
      return std::nullopt;
    };
    if (s.attrs->axis != rank - 1 && s.attrs->axis != -1) {
      return not_fused("the softmax is not over the last axis");
    }
    if (!only_read_by(softmax, {m})) {
      return not_fused(absl::StrCat("the probabilities %", softmax,
                                    " are also read elsewhere (or are an output), so they are "
                                    "stored"));
    }
    // The ops between q·kᵀ and the softmax: same-shape elementwise nodes down to one matmul.
    const int pre = s.args[0];
    FusedAttention f;
    f.attention = m;
    f.softmax = softmax;
    std::vector<int> stack{pre};
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      const TraceNode& node = trace_.nodes[n];
      if (node.type->shape != s.type->shape) continue;  // a mask or scalar read per score
      if (node.op == OpKind::Matmul) {
        if (f.raw_scores >= 0 && f.raw_scores != n) return not_fused("two matmuls feed the scores");
        f.raw_scores = n;
        continue;
      }
      if (!is_elementwise(node.op)) continue;
      if (std::find(f.score_nodes.begin(), f.score_nodes.end(), n) != f.score_nodes.end()) continue;
      f.score_nodes.push_back(n);
      for (int a : node.args) stack.push_back(a);
    }
    if (f.raw_scores < 0) return not_fused("no q @ kᵀ matmul feeds the softmax elementwise");
    std::vector<int> inside = f.score_nodes;
    inside.push_back(softmax);
    for (int n : f.score_nodes) {
      if (!only_read_by(n, inside)) {
        return not_fused(absl::StrCat("the score op %", n, " is also read elsewhere"));
      }
    }
    if (!only_read_by(f.raw_scores, inside)) {
      return not_fused(absl::StrCat("the scores %", f.raw_scores,
                                    " are also read elsewhere (or are an output)"));
    }
    const TraceNode& raw = trace_.nodes[f.raw_scores];
    const TraceNode& kt = trace_.nodes[raw.args[1]];
    if (!swaps_last_two(kt)) {
      return not_fused("the scores' right operand is not k transposed over its last two dims");
    }
    q_ = raw.args[0];
    k_ = kt.args[0];
    v_ = mm.args[1];
    std::vector<ops::ValueType> types;
    for (int n : {q_, k_, v_, pre}) types.push_back(*trace_.nodes[n].type);
    types[3].dtype = types[0].dtype;  // the score ops' dtype is the kernel's business
    ops::Attrs attrs;
    absl::StatusOr<ops::ValueType> out = ops::infer_output(OpKind::Attention, types, attrs);
    if (!out.ok()) return not_fused(std::string(out.status().message()));
    if (out->shape != mm.type->shape || out->dtype != mm.type->dtype) {
      return not_fused("the result's type differs from the matmul's");
    }
    notes.push_back(absl::StrCat("%", m, " = softmax(%", pre, ") @ %", v_,
                                 " is fused into one scaled_dot_product_attention kernel: the "
                                 "scores %",
                                 f.raw_scores, " = %", q_, " @ %", k_,
                                 "ᵀ and the ops up to the softmax are computed per key tile, "
                                 "never stored"));
    return f;
  }
  int q() const { return q_; }
  int k() const { return k_; }
  int v() const { return v_; }

 private:
  // Whether every reader of `node` is in `readers` (an output never is).
  bool only_read_by(int node, const std::vector<int>& readers) const {
    for (int u : users_[node]) {
      if (std::find(readers.begin(), readers.end(), u) == readers.end()) return false;
    }
    return true;
  }

  const Trace& trace_;
  std::vector<std::vector<int>> users_;
  int q_ = -1, k_ = -1, v_ = -1;
};

}  // namespace

AttentionRewrite fuse_hand_written_attention(const Trace& trace) {
  AttentionRewrite out;
  Matcher matcher(trace);
  struct Found {
    FusedAttention f;
    int q, k, v;
  };
  std::vector<Found> found;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (std::optional<FusedAttention> f = matcher.match(static_cast<int>(i), out.notes)) {
      found.push_back({*f, matcher.q(), matcher.k(), matcher.v()});
    }
  }
  if (found.empty()) return out;
  out.trace = trace;
  auto attrs = std::make_shared<ops::Attrs>();
  attrs->scale = 1.0;  // the scale, if any, is one of the score ops
  out.attrs = attrs;
  for (const Found& x : found) {
    TraceNode& node = out.trace.nodes[x.f.attention];
    const int pre = trace.nodes[x.f.softmax].args[0];
    node.op = OpKind::Attention;
    node.attrs = attrs.get();
    node.param_slot = -1;
    node.args = {x.q, x.k, x.v, pre};
    out.trace.nodes[x.f.softmax].args.clear();  // no longer computed: nothing reads it
    out.fused.push_back(x.f);
  }
  return out;
}

}  // namespace kiln::jit
