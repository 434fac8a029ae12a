// dump_trace: the graph behind some tensors as text, kiln.trace JSON or Graphviz DOT.
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jit/backend/backend.h"
#include "jit/formats/trace_export.h"
#include "jit/formats/trace_format.h"
#include "jit/graph/pending_graph.h"
#include "kiln/error.h"

namespace kiln::jit {
namespace {

using detail::Node;
using nlohmann::json;

// One row per node: the facts every format prints.
struct Row {
  int id;
  const Node* node;
  std::string op;    // "input" for realized values
  std::string name;  // inputs only
  std::vector<int> args;
};

struct Listing {
  std::vector<Row> rows;
  std::vector<int> outputs;
};

Listing list_nodes(const std::vector<Node*>& outputs) {
  Listing listing;
  absl::flat_hash_map<const Node*, int> ids;
  absl::flat_hash_set<std::string> names;
  int unnamed = 0;
  for (const Node* node : collect_all(outputs)) {
    Row row{static_cast<int>(listing.rows.size()), node, ops::op_name(node->op), "", {}};
    if (node->realized() || node->op == ops::OpKind::Input) {
      row.op = "input";
      row.name = node->attrs.name;
      while (row.name.empty() || names.contains(row.name)) row.name = absl::StrCat("in", unnamed++);
      names.insert(row.name);
    }
    for (const auto& input : node->inputs) row.args.push_back(ids.at(input.get()));
    ids[node] = row.id;
    listing.rows.push_back(std::move(row));
  }
  for (const Node* out : outputs) listing.outputs.push_back(ids.at(out));
  return listing;
}

std::string attrs_text(const json& attrs) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : attrs.items())
    parts.push_back(absl::StrCat(key, "=", value.dump()));
  return parts.empty() ? "" : absl::StrCat(" {", absl::StrJoin(parts, ", "), "}");
}

std::string format_text(const Listing& listing) {
  std::string out;
  for (const Row& row : listing.rows) {
    std::vector<std::string> args;
    for (int a : row.args) args.push_back(absl::StrCat("%", a));
    absl::StrAppend(&out, "%", row.id, " = ", row.op);
    if (row.op == "input") absl::StrAppend(&out, " \"", row.name, "\"");
    if (row.node->op == ops::OpKind::Constant && row.op != "input") {
      absl::StrAppend(&out, " ", scalar_to_json(row.node->attrs.value).dump());
    }
    if (!args.empty()) absl::StrAppend(&out, "(", absl::StrJoin(args, ", "), ")");
    if (row.op != "input")
      absl::StrAppend(&out, attrs_text(attrs_to_json(row.node->op, row.node->attrs)));
    absl::StrAppend(&out, " : ", ops::format_type(row.node->type), "\n");
  }
  std::vector<std::string> outs;
  for (int o : listing.outputs) outs.push_back(absl::StrCat("%", o));
  absl::StrAppend(&out, "outputs: ", absl::StrJoin(outs, ", "), "\n");
  return out;
}

std::string format_dot(const Listing& listing) {
  std::string out = "digraph kiln_trace {\n  node [shape=box, fontname=monospace];\n";
  absl::flat_hash_set<int> outputs(listing.outputs.begin(), listing.outputs.end());
  for (const Row& row : listing.rows) {
    std::string label = row.op == "input" ? absl::StrCat("input ", row.name) : row.op;
    std::string attrs =
        row.op == "input" ? "" : attrs_text(attrs_to_json(row.node->op, row.node->attrs));
    for (char& c : attrs) {
      if (c == '"') c = '\'';
    }
    absl::StrAppend(&out, "  n", row.id, " [label=\"%", row.id, " ", label, attrs, "\\n",
                    ops::format_type(row.node->type), "\"",
                    outputs.contains(row.id) ? ", style=bold" : "", "];\n");
    for (int a : row.args) absl::StrAppend(&out, "  n", a, " -> n", row.id, ";\n");
  }
  return out + "}\n";
}

}  // namespace

TraceExport export_trace(const std::vector<Node*>& outputs) {
  Listing listing = list_nodes(outputs);
  TraceExport result;
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const Row& row : listing.rows) {
    nlohmann::ordered_json j;
    j["id"] = row.id;
    j["op"] = row.op;
    if (row.op == "input") {
      j["name"] = row.name;
      if (row.node->realized())
        result.inputs.push_back({row.name, row.node->type, jit::host_view(row.node->buffer)});
    } else {
      if (row.node->op == ops::OpKind::Constant) j["value"] = scalar_to_json(row.node->attrs.value);
      if (!row.args.empty()) j["args"] = row.args;
      json attrs = attrs_to_json(row.node->op, row.node->attrs);
      if (!attrs.empty()) j["attrs"] = nlohmann::ordered_json(attrs);
    }
    j["dtype"] = dtype_name(row.node->type.dtype);
    j["shape"] = row.node->type.shape;
    nodes.push_back(std::move(j));
  }
  result.json = {{"format", kTraceFormat},
                 {"version", kTraceVersion},
                 {"nodes", std::move(nodes)},
                 {"outputs", listing.outputs}};
  return result;
}

std::string trace_json_text(const nlohmann::ordered_json& doc) {
  // One node per line: diffs of two dumps then read node by node.
  std::string out = absl::StrCat("{\"format\": ", doc.at("format").dump(),
                                 ", \"version\": ", doc.at("version").dump(), ",\n \"nodes\": [\n");
  const auto& nodes = doc.at("nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    absl::StrAppend(&out, "  ", nodes[i].dump(), i + 1 < nodes.size() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, " ],\n \"outputs\": ", doc.at("outputs").dump(), "}\n");
  return out;
}

std::string format_trace(const std::vector<Node*>& outputs, DumpFormat format) {
  switch (format) {
    case DumpFormat::Json:
      return trace_json_text(export_trace(outputs).json);
    case DumpFormat::Dot:
      return format_dot(list_nodes(outputs));
    case DumpFormat::Text:
      break;
  }
  return format_text(list_nodes(outputs));
}

}  // namespace kiln::jit

namespace kiln {

std::string dump_trace(const std::vector<Tensor>& outputs, DumpFormat f) {
  std::vector<detail::Node*> nodes;
  for (const Tensor& t : outputs) {
    if (!t.defined()) throw Error("[dump_trace] an output tensor is empty (undefined)");
    nodes.push_back(detail::TensorAccess::node(t).get());
  }
  return jit::format_trace(nodes, f);
}

}  // namespace kiln
