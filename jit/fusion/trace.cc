#include "jit/fusion/trace.h"

#include <atomic>
#include <bit>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "kiln/error.h"

namespace kiln::jit {
namespace {

using detail::Node;

// The structural tokens of one node: everything that shapes its kernels except scalars.
void append_structure(ops::OpKind op, const ops::ValueType& type, const ops::Attrs& a,
                      const absl::InlinedVector<int, 3>& args, std::vector<int64_t>& out) {
  out.push_back(static_cast<int64_t>(op));
  out.push_back(static_cast<int64_t>(type.dtype));
  out.push_back(static_cast<int64_t>(type.shape.size()));
  out.insert(out.end(), type.shape.begin(), type.shape.end());
  out.push_back(static_cast<int64_t>(args.size()));
  out.insert(out.end(), args.begin(), args.end());
  switch (ops::op_class(op)) {
    case ops::OpClass::kReduce:
    case ops::OpClass::kView:
      out.push_back(static_cast<int64_t>(a.axes.size()));
      out.insert(out.end(), a.axes.begin(), a.axes.end());
      out.push_back(static_cast<int64_t>(a.shape.size()));
      out.insert(out.end(), a.shape.begin(), a.shape.end());
      out.insert(out.end(), {a.keepdims, a.axis, a.start, a.stop, a.step});
      break;
    case ops::OpClass::kArgReduce:
    case ops::OpClass::kConcat:
    case ops::OpClass::kGather:
      out.insert(out.end(), {a.keepdims, a.axis});
      break;
    case ops::OpClass::kRowNorm:  // topk's k is its result's extent, part of the key anyway
      out.insert(out.end(), {a.axis, a.largest, a.exclusive, a.reverse});
      break;
    case ops::OpClass::kUpdateSlice:  // start is a parameter; a region's other starts are not
      out.push_back(a.axis);
      out.push_back(static_cast<int64_t>(a.offsets.size()));
      out.insert(out.end(), a.offsets.begin(), a.offsets.end());
      break;
    case ops::OpClass::kAttention:  // scale is a parameter
      out.insert(out.end(), {a.causal, a.bottom_right});
      break;
    case ops::OpClass::kCast:
      out.push_back(static_cast<int64_t>(a.dtype));
      break;
    case ops::OpClass::kCollective:
      out.insert(out.end(), {a.group, a.reduction, a.peer, a.axis});
      break;
    case ops::OpClass::kCustom:
    case ops::OpClass::kCustomKernel:
      out.push_back(a.function);
      break;
    case ops::OpClass::kLeaf:  // values and seeds are parameters, not part of the key
    case ops::OpClass::kUnary:
    case ops::OpClass::kBinary:
    case ops::OpClass::kWhere:
    case ops::OpClass::kMatmul:
      break;
  }
}

class TraceBuilder {
 public:
  Trace build(const std::vector<Node*>& outputs) {
    // A fresh epoch marks the nodes this trace has seen (one sync at a time per graph; see
    // docs/architecture.md).
    epoch_ = Node::new_walk_epoch();
    std::vector<std::pair<Node*, size_t>> stack;
    for (Node* root : outputs) {
      if (seen(root)) continue;
      stack.emplace_back(root, 0);
      while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (!node->realized() && next < node->inputs.size()) {
          Node* input = node->inputs[next++].get();
          if (!seen(input)) stack.emplace_back(input, 0);
          continue;
        }
        Node* done = node;
        stack.pop_back();
        if (!seen(done)) add(done);
      }
    }
    for (Node* out : outputs) trace_.outputs.push_back(index_of(out));
    trace_.key.push_back(-1);
    trace_.key.insert(trace_.key.end(), trace_.outputs.begin(), trace_.outputs.end());
    trace_.key_hash = absl::HashOf(trace_.key);
    return std::move(trace_);
  }

 private:
  // Pending nodes belong to the syncing thread's program, so they carry the marks; realized
  // leaves (weights) are often shared by programs on other threads, so they are never written
  // and their marks live here.
  bool seen(const Node* n) const {
    return n->realized() ? leaf_index_.contains(n) : n->trace_epoch == epoch_;
  }
  int index_of(const Node* n) const { return n->realized() ? leaf_index_.at(n) : n->trace_index; }

  void add(Node* done) {
    TraceNode tn;
    tn.type = &done->type;
    tn.attrs = &done->attrs;
    if (done->realized()) {
      tn.op = ops::OpKind::Input;
      tn.input_slot = static_cast<int>(trace_.inputs.size());
      trace_.inputs.push_back(done);
    } else {
      if (done->op == ops::OpKind::Input) {
        throw Error(absl::StrCat("[input] '", done->attrs.name, "' is a placeholder without data (",
                                 ops::format_type(done->type),
                                 "); give it a tensor before evaluating"));
      }
      tn.op = done->op;
      for (const auto& input : done->inputs) tn.args.push_back(index_of(input.get()));
    }
    // The node's tokens go on the key; an equal earlier node (same tokens) is reused and the
    // tokens taken back. Nodes carrying scalars merge only with themselves: merging two
    // constants because their values match would change the structure whenever they do.
    const size_t begin = trace_.key.size();
    append_structure(tn.op, *tn.type, *tn.attrs, tn.args, trace_.key);
    // Two equal collectives are two exchanges that the other ranks make too: never merged.
    const bool mergeable = tn.op != ops::OpKind::Input && param_count(tn.op) == 0 &&
                           ops::op_class(tn.op) != ops::OpClass::kCollective;
    if (mergeable) {
      const size_t hash =
          absl::HashOf(absl::MakeConstSpan(trace_.key.data() + begin, trace_.key.size() - begin));
      auto [it, inserted] = cse_.try_emplace(hash, static_cast<int>(trace_.nodes.size()));
      if (!inserted && same_tokens(it->second, begin)) {
        trace_.key.resize(begin);
        mark(done, it->second);
        return;
      }
    }
    token_begin_.push_back(begin);
    if (param_count(tn.op) > 0) {
      tn.param_slot = static_cast<int>(trace_.params.size());
      if (tn.op == ops::OpKind::Constant) trace_.params.push_back(done->attrs.value);
      if (tn.op == ops::OpKind::Rand || tn.op == ops::OpKind::Randn) {
        trace_.params.push_back(std::bit_cast<double>(done->attrs.seed));
      }
      if (tn.op == ops::OpKind::LayerNorm || tn.op == ops::OpKind::RmsNorm) {
        trace_.params.push_back(done->attrs.eps);
      }
      if (tn.op == ops::OpKind::UpdateSlice) {
        trace_.params.push_back(static_cast<double>(done->attrs.start));
      }
      if (tn.op == ops::OpKind::Attention) trace_.params.push_back(done->attrs.scale);
    }
    mark(done, static_cast<int>(trace_.nodes.size()));
    trace_.nodes.push_back(std::move(tn));
  }

  // Whether node `index`'s tokens equal the tokens from `begin` to the end of the key.
  bool same_tokens(int index, size_t begin) const {
    const size_t other = token_begin_[index];
    const size_t other_end =
        static_cast<size_t>(index) + 1 < token_begin_.size() ? token_begin_[index + 1] : begin;
    const size_t len = trace_.key.size() - begin;
    return other_end - other == len &&
           std::equal(trace_.key.begin() + other, trace_.key.begin() + other_end,
                      trace_.key.begin() + begin);
  }

  void mark(Node* n, int index) {
    if (n->realized()) {
      leaf_index_[n] = index;
      return;
    }
    n->trace_epoch = epoch_;
    n->trace_index = index;
  }

  Trace trace_;
  uint64_t epoch_ = 0;
  std::vector<size_t> token_begin_;                   // per trace node, where its tokens start
  absl::flat_hash_map<size_t, int> cse_;              // token hash -> first node with it
  absl::flat_hash_map<const Node*, int> leaf_index_;  // realized leaves seen, by trace index
};

}  // namespace

int param_count(ops::OpKind op) {
  // A constant's value, a random leaf's seed, a norm's epsilon, update_slice's start,
  // attention's scale.
  const bool has_scalar = op == ops::OpKind::Constant || op == ops::OpKind::Rand ||
                          op == ops::OpKind::Randn || op == ops::OpKind::LayerNorm ||
                          op == ops::OpKind::RmsNorm || op == ops::OpKind::UpdateSlice ||
                          op == ops::OpKind::Attention;
  return has_scalar ? 1 : 0;
}

Trace build_trace(const std::vector<Node*>& outputs) { return TraceBuilder().build(outputs); }

}  // namespace kiln::jit
