// Loading kiln.trace files: parse, check every node against inference, replay on inputs.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/formats/npy_file.h"
#include "jit/formats/trace_format.h"
#include "jit/graph/node.h"
#include "jit/graph/record.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "kiln/io.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/op_catalog.h"

namespace kiln {

using nlohmann::json;

// Ops a trace may use besides the catalog: public API composites, expanded on load.
enum class Alias { kNone, kTranspose, kUnsqueeze, kSqueeze, kLinear };

struct NodeSpec {
  int64_t id = 0;
  std::string op_name;
  ops::OpKind kind = ops::OpKind::Input;
  Alias alias = Alias::kNone;
  std::vector<int64_t> args;
  ops::Attrs attrs;
  json raw_attrs;  // for aliases
  ops::ValueType type;
};

struct LoadedTrace::Impl {
  std::vector<Input> inputs;
  std::vector<NodeSpec> nodes;  // in topological order
  std::vector<int64_t> outputs;
  std::vector<Tensor> build(const std::map<std::string, Tensor>& inputs) const;
};

namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("trace: " + what); }
[[noreturn]] void fail_node(const NodeSpec& n, const std::string& what) {
  fail(absl::StrCat("node ", n.id, " (", n.op_name, "): ", what));
}

template <class T>
T get_field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) fail(absl::StrCat(where, ": missing \"", key, "\""));
  T value{};
  if (!jit::json_to(j.at(key), value)) {
    fail(absl::StrCat(where, ": \"", key, "\" has the wrong type: ", j.at(key).dump()));
  }
  return value;
}

NodeSpec parse_node(const json& j, size_t index) {
  const std::string where = absl::StrCat("nodes[", index, "]");
  if (!j.is_object()) fail(where + ": must be an object");
  NodeSpec n;
  n.id = get_field<int64_t>(j, "id", where);
  n.op_name = get_field<std::string>(j, "op", where);
  static const absl::flat_hash_map<std::string, Alias> kAliases = {{"transpose", Alias::kTranspose},
                                                                   {"unsqueeze", Alias::kUnsqueeze},
                                                                   {"squeeze", Alias::kSqueeze},
                                                                   {"linear", Alias::kLinear}};
  if (auto it = kAliases.find(n.op_name); it != kAliases.end()) {
    n.alias = it->second;
  } else if (std::optional<ops::OpKind> kind = ops::op_from_name(n.op_name)) {
    n.kind = *kind;
  } else {
    fail_node(n, "unknown op");
  }
  try {
    n.type.dtype = dtype_from_name(get_field<std::string>(j, "dtype", where));
  } catch (const Error& e) {
    fail_node(n, e.what());
  }
  n.type.shape = get_field<std::vector<int64_t>>(j, "shape", where);
  if (j.contains("args")) n.args = get_field<std::vector<int64_t>>(j, "args", where);
  n.raw_attrs = j.contains("attrs") ? j.at("attrs") : json();
  if (n.alias == Alias::kNone) {
    absl::StatusOr<ops::Attrs> attrs = jit::attrs_from_json(n.kind, n.raw_attrs);
    if (!attrs.ok()) fail_node(n, std::string(attrs.status().message()));
    n.attrs = *std::move(attrs);
  }
  if (n.kind == ops::OpKind::Input && n.alias == Alias::kNone) {
    n.attrs.name = get_field<std::string>(j, "name", where);
    if (n.attrs.name.empty()) fail_node(n, "an input needs a non-empty \"name\"");
  }
  if (n.kind == ops::OpKind::Constant && n.alias == Alias::kNone) {
    if (!j.contains("value")) fail_node(n, "a constant needs a \"value\"");
    absl::StatusOr<double> value = jit::scalar_from_json(j.at("value"));
    if (!value.ok()) fail_node(n, std::string(value.status().message()));
    n.attrs.value = *value;
  }
  if (ops::op_class(n.kind) == ops::OpClass::kLeaf && n.alias == Alias::kNone) {
    if (!n.args.empty()) fail_node(n, "a leaf takes no \"args\"");
    n.attrs.shape = n.type.shape;
    n.attrs.dtype = n.type.dtype;
  }
  return n;
}

// Orders nodes so every argument comes first (Kahn's algorithm); a dangling id or a cycle is
// an error naming the node.
std::vector<NodeSpec> topological(std::vector<NodeSpec> nodes) {
  absl::flat_hash_map<int64_t, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!index.emplace(nodes[i].id, i).second) fail_node(nodes[i], "duplicate id");
  }
  std::vector<int> missing(nodes.size(), 0);
  std::vector<std::vector<size_t>> users(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int64_t arg : nodes[i].args) {
      auto it = index.find(arg);
      if (it == index.end())
        fail_node(nodes[i], absl::StrCat("argument ", arg, " is not a node id"));
      users[it->second].push_back(i);
      ++missing[i];
    }
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (missing[i] == 0) ready.push_back(i);
  }
  std::vector<NodeSpec> order;
  std::vector<bool> done(nodes.size(), false);
  // Pop the lowest position first, so a file already in order keeps its order.
  std::vector<size_t> heap;
  auto cmp = [](size_t a, size_t b) { return a > b; };
  for (size_t r : ready) {
    heap.push_back(r);
    std::push_heap(heap.begin(), heap.end(), cmp);
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    size_t i = heap.back();
    heap.pop_back();
    done[i] = true;
    for (size_t u : users[i]) {
      if (--missing[u] == 0) {
        heap.push_back(u);
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
    order.push_back(nodes[i]);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!done[i]) fail_node(nodes[i], "is part of a cycle (or depends on one)");
  }
  return order;
}

template <class T>
T alias_attr(const NodeSpec& n, const char* key) {
  if (!n.raw_attrs.is_object() || !n.raw_attrs.contains(key)) {
    fail_node(n, absl::StrCat("missing attribute '", key, "'"));
  }
  T value{};
  if (!jit::json_to(n.raw_attrs.at(key), value)) {
    fail_node(n, absl::StrCat("attribute '", key, "' has the wrong type"));
  }
  return value;
}

Tensor apply_node(const NodeSpec& n, const std::vector<Tensor>& args) {
  auto need_args = [&](size_t count) {
    if (args.size() != count) {
      fail_node(n, absl::StrCat("takes ", count, " args, got ", args.size()));
    }
  };
  switch (n.alias) {
    case Alias::kTranspose:
      need_args(1);
      return args[0].transpose(alias_attr<int>(n, "a"), alias_attr<int>(n, "b"));
    case Alias::kUnsqueeze:
      need_args(1);
      return args[0].unsqueeze(alias_attr<int>(n, "axis"));
    case Alias::kSqueeze:
      need_args(1);
      return args[0].squeeze(alias_attr<int>(n, "axis"));
    case Alias::kLinear:
      need_args(3);
      return linear(args[0], args[1], args[2]);
    case Alias::kNone:
      break;
  }
  return jit::record(n.kind, args, n.attrs);
}

}  // namespace

std::vector<Tensor> LoadedTrace::Impl::build(const std::map<std::string, Tensor>& given) const {
  absl::flat_hash_map<int64_t, Tensor> values;
  for (const NodeSpec& n : nodes) {
    Tensor t;
    if (n.kind == ops::OpKind::Input && n.alias == Alias::kNone) {
      auto it = given.find(n.attrs.name);
      if (it == given.end()) fail(absl::StrCat("no tensor given for input '", n.attrs.name, "'"));
      t = it->second;
    } else {
      std::vector<Tensor> args;
      for (int64_t a : n.args) args.push_back(values.at(a));
      try {
        t = apply_node(n, args);
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.rfind("trace: ", 0) == 0) throw;
        fail_node(n, what);
      }
    }
    if (t.dtype() != n.type.dtype || t.shape() != n.type.shape) {
      fail_node(n, absl::StrCat(
                       "declared ", ops::format_type(n.type), " but ",
                       n.kind == ops::OpKind::Input ? "the given tensor is " : "inference gives ",
                       dtype_name(t.dtype()), ops::format_shape(t.shape())));
    }
    values[n.id] = t;
  }
  std::vector<Tensor> result;
  for (int64_t o : outputs) result.push_back(values.at(o));
  return result;
}

const std::vector<LoadedTrace::Input>& LoadedTrace::inputs() const { return impl_->inputs; }
size_t LoadedTrace::num_outputs() const { return impl_->outputs.size(); }

std::vector<Tensor> LoadedTrace::run(const std::map<std::string, Tensor>& inputs) const {
  return impl_->build(inputs);
}

namespace {

std::shared_ptr<const LoadedTrace::Impl> load_document(const json& doc) {
  if (!doc.is_object()) fail("the document must be a JSON object");
  if (!doc.contains("format") || !doc.at("format").is_string() ||
      doc.at("format").get<std::string>() != jit::kTraceFormat) {
    fail("\"format\" must be \"kiln.trace\"");
  }
  if (!doc.contains("version") || !doc.at("version").is_number_integer() ||
      doc.at("version").get<int64_t>() != jit::kTraceVersion) {
    fail(absl::StrCat("unsupported \"version\" (this build reads version ", jit::kTraceVersion,
                      ")"));
  }
  if (!doc.contains("nodes") || !doc.at("nodes").is_array()) fail("\"nodes\" must be an array");
  auto impl = std::make_shared<LoadedTrace::Impl>();
  std::vector<NodeSpec> nodes;
  for (size_t i = 0; i < doc.at("nodes").size(); ++i)
    nodes.push_back(parse_node(doc.at("nodes")[i], i));
  impl->nodes = topological(std::move(nodes));
  impl->outputs = get_field<std::vector<int64_t>>(doc, "outputs", "the document");
  if (impl->outputs.empty()) fail("\"outputs\" is empty");
  absl::flat_hash_set<int64_t> ids;
  absl::flat_hash_set<std::string> names;
  std::map<std::string, Tensor> placeholders;
  for (const NodeSpec& n : impl->nodes) {
    ids.insert(n.id);
    if (n.kind != ops::OpKind::Input || n.alias != Alias::kNone) continue;
    if (!names.insert(n.attrs.name).second)
      fail_node(n, absl::StrCat("input name '", n.attrs.name, "' is used twice"));
    absl::StatusOr<int64_t> count = ops::checked_numel(n.type.shape);
    if (!count.ok()) fail_node(n, std::string(count.status().message()));
    impl->inputs.push_back({n.attrs.name, n.type.dtype, n.type.shape});
    placeholders[n.attrs.name] = jit::make_placeholder(n.type, n.attrs.name);
  }
  for (int64_t o : impl->outputs) {
    if (!ids.contains(o)) fail(absl::StrCat("output ", o, " is not a node id"));
  }
  impl->build(placeholders);  // checks every node against inference; computes nothing
  return impl;
}

}  // namespace

LoadedTrace load_trace(const std::string& json_text) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(absl::StrCat("malformed JSON: ", e.what()));
  }
  try {
    return LoadedTrace(load_document(doc));
  } catch (const json::exception& e) {
    // Every field is checked before it is read; this is the net under those checks.
    fail(absl::StrCat("a field has an unexpected JSON type: ", e.what()));
  }
}

LoadedTrace load_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(absl::StrCat("trace: cannot open ", path));
  std::stringstream text;
  text << in.rdbuf();
  return load_trace(text.str());
}

void replay_trace(const std::string& trace_path, const std::string& inputs_dir,
                  const std::string& out_dir) {
  LoadedTrace trace = load_trace_file(trace_path);
  std::map<std::string, Tensor> inputs;
  for (const LoadedTrace::Input& in : trace.inputs()) {
    const std::string path = absl::StrCat(inputs_dir, "/", in.name, ".npy");
    absl::StatusOr<jit::NpyArray> array = jit::read_npy(path);
    if (!array.ok()) throw Error(absl::StrCat("input '", in.name, "': ", array.status().message()));
    Tensor t = jit::realized_on(array->type, array->data, default_device());
    // BF16 travels as f32 in .npy (numpy has no bfloat16): narrow it back, exactly.
    if (in.dtype == DType::BF16 && t.dtype() == DType::F32) t = t.astype(DType::BF16);
    if (t.dtype() != in.dtype || t.shape() != in.shape) {
      throw Error(absl::StrCat("input '", in.name, "': ", path, " holds ", dtype_name(t.dtype()),
                               ops::format_shape(t.shape()), " but the trace expects ",
                               dtype_name(in.dtype), ops::format_shape(in.shape)));
    }
    inputs[in.name] = t;
  }
  std::vector<Tensor> outputs = trace.run(inputs);
  eval(outputs);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw Error(absl::StrCat("cannot create ", out_dir, ": ", ec.message()));
  for (size_t i = 0; i < outputs.size(); ++i)
    save_npy(absl::StrCat(out_dir, "/out", i, ".npy"), outputs[i]);
}

}  // namespace kiln
