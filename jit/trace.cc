#include "jit/trace.h"

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
                      const std::vector<int>& args, std::vector<int64_t>& out) {
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
    case ops::OpClass::kRowNorm:
      out.insert(out.end(), {a.keepdims, a.axis});
      break;
    case ops::OpClass::kCast:
      out.push_back(static_cast<int64_t>(a.dtype));
      break;
    default:
      break;
  }
}

double seed_as_param(uint64_t seed) { return std::bit_cast<double>(seed); }

}  // namespace

int param_count(ops::OpKind op) {
  switch (op) {
    case ops::OpKind::Constant:
    case ops::OpKind::Rand:
    case ops::OpKind::Randn:
    case ops::OpKind::LayerNorm:
    case ops::OpKind::RmsNorm:
      return 1;
    default:
      return 0;
  }
}

Trace build_trace(const std::vector<Node*>& outputs) {
  Trace trace;
  absl::flat_hash_map<const Node*, int> canonical;     // node -> canonical index
  absl::flat_hash_map<std::vector<int64_t>, int> cse;  // structure + scalars -> index
  std::vector<int64_t> tokens;
  // Post-order DFS from the outputs, inputs in argument order: a canonical order.
  std::vector<std::pair<Node*, size_t>> stack;
  for (Node* root : outputs) {
    if (canonical.contains(root)) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (!node->realized() && next < node->inputs.size()) {
        Node* input = node->inputs[next++].get();
        if (!canonical.contains(input)) stack.emplace_back(input, 0);
        continue;
      }
      Node* done = node;
      stack.pop_back();
      if (canonical.contains(done)) continue;
      TraceNode tn;
      tn.type = done->type;
      if (done->realized()) {
        tn.op = ops::OpKind::Input;
        tn.input_slot = static_cast<int>(trace.inputs.size());
        trace.inputs.push_back(done);
      } else {
        if (done->op == ops::OpKind::Input) {
          throw Error(
              absl::StrCat("[input] '", done->attrs.name, "' is a placeholder without data (",
                           ops::format_type(done->type), "); give it a tensor before evaluating"));
        }
        tn.op = done->op;
        tn.attrs = done->attrs;
        for (const auto& input : done->inputs) tn.args.push_back(canonical.at(input.get()));
        // Merge a node equal to an earlier one (same structure, same scalars).
        tokens.clear();
        append_structure(done->op, done->type, done->attrs, tn.args, tokens);
        // Nodes carrying scalars merge only with themselves: merging two constants because
        // their values happen to match would change the structure whenever they do, and so
        // the plan and kernels, for a loop whose scalars change every step.
        if (param_count(done->op) > 0) tokens.push_back(reinterpret_cast<intptr_t>(done));
        auto [it, inserted] = cse.try_emplace(tokens, static_cast<int>(trace.nodes.size()));
        if (!inserted) {
          canonical[done] = it->second;
          continue;
        }
      }
      canonical[done] = static_cast<int>(trace.nodes.size());
      trace.nodes.push_back(std::move(tn));
    }
  }
  for (Node* out : outputs) trace.outputs.push_back(canonical.at(out));

  // Parameters and the key, over the canonical nodes.
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    TraceNode& tn = trace.nodes[i];
    if (param_count(tn.op) > 0) {
      tn.param_slot = static_cast<int>(trace.params.size());
      if (tn.op == ops::OpKind::Constant) trace.params.push_back(tn.attrs.value);
      if (tn.op == ops::OpKind::Rand || tn.op == ops::OpKind::Randn) {
        trace.params.push_back(seed_as_param(tn.attrs.seed));
      }
      if (tn.op == ops::OpKind::LayerNorm || tn.op == ops::OpKind::RmsNorm) {
        trace.params.push_back(tn.attrs.eps);
      }
    }
    append_structure(tn.op, tn.type, tn.attrs, tn.args, trace.key);
  }
  trace.key.push_back(-1);
  trace.key.insert(trace.key.end(), trace.outputs.begin(), trace.outputs.end());
  trace.key_hash = absl::HashOf(trace.key);
  return trace;
}

}  // namespace kiln::jit
