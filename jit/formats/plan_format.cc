// Launch plans and Kernel IR programs as JSON (plan_format.h). Enumerations travel by name
// (op names, dtype spellings, anchor kinds as kernel dumps print them), so a bundle reads
// like a plan dump. Reading throws FormatError internally at the first field that is missing,
// of the wrong kind or out of range; the public functions turn it into a status naming it.
#include "jit/formats/plan_format.h"

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "jit/formats/trace_format.h"
#include "kiln/error.h"
#include "ops/op_catalog.h"

namespace kiln::jit {
namespace {

using nlohmann::json;

struct FormatError {
  std::string message;
};

[[noreturn]] void fail(std::string message) { throw FormatError{std::move(message)}; }

void require(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// object[key], or null when `object` is not an object or has no such key (a reference: a
// copy of a JSON subtree recurses as deep as it nests).
const json& member(const json& object, const char* key) {
  static const json* const null = new json();
  if (!object.is_object()) return *null;
  const auto it = object.find(key);
  return it == object.end() ? *null : *it;
}

template <class T>
T get(const json& object, const char* key) {
  require(object.is_object(), absl::StrCat("expected an object holding \"", key, "\""));
  const auto it = object.find(key);
  require(it != object.end(), absl::StrCat("\"", key, "\" is missing"));
  T value{};
  require(json_to(*it, value), absl::StrCat("\"", key, "\" has the wrong kind of value"));
  return value;
}

constexpr std::array<const char*, 10> kInstrKindNames = {"load",   "param", "index_leaf", "unary",
                                                         "binary", "where", "cast",       "anchor",
                                                         "custom", "gather"};
static_assert(static_cast<size_t>(InstrKind::kGather) + 1 == kInstrKindNames.size());

constexpr std::array<const char*, 4> kViewAccessNames = {"contiguous", "broadcast", "strided",
                                                         "gathered"};
static_assert(static_cast<size_t>(ViewAccess::kGathered) + 1 == kViewAccessNames.size());

template <class Enum, size_t N>
Enum enum_from_name(const std::array<const char*, N>& names, const std::string& name,
                    const char* what) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<Enum>(i);
  }
  fail(absl::StrCat("unknown ", what, " \"", name, "\""));
}

AnchorKind anchor_from_name(const std::string& name) {
  for (int a = 0; a <= static_cast<int>(AnchorKind::kCollective); ++a) {
    if (name == anchor_name(static_cast<AnchorKind>(a))) return static_cast<AnchorKind>(a);
  }
  fail(absl::StrCat("unknown anchor kind \"", name, "\""));
}

DType dtype_of(const json& object, const char* key) {
  const std::string name = get<std::string>(object, key);
  try {
    return dtype_from_name(name);
  } catch (const Error&) {
    fail(absl::StrCat("\"", key, "\": unknown dtype \"", name, "\""));
  }
}

std::vector<DType> dtypes_of(const json& object, const char* key) {
  std::vector<DType> out;
  for (const std::string& name : get<std::vector<std::string>>(object, key)) {
    try {
      out.push_back(dtype_from_name(name));
    } catch (const Error&) {
      fail(absl::StrCat("\"", key, "\": unknown dtype \"", name, "\""));
    }
  }
  return out;
}

json dtype_names(const std::vector<DType>& dtypes) {
  json out = json::array();
  for (DType dt : dtypes) out.push_back(dtype_name(dt));
  return out;
}

ops::OpKind op_of(const json& object, const char* key) {
  const std::string name = get<std::string>(object, key);
  const std::optional<ops::OpKind> op = ops::op_from_name(name);
  require(op.has_value(), absl::StrCat("\"", key, "\": unknown op \"", name, "\""));
  return *op;
}

// Every field of ops::Attrs: lowering may set any of them on an anchor.
json attrs_json(const ops::Attrs& a) {
  return json{{"shape", a.shape},
              {"axes", a.axes},
              {"keepdims", a.keepdims},
              {"axis", a.axis},
              {"start", a.start},
              {"offsets", a.offsets},
              {"stop", a.stop},
              {"step", a.step},
              {"value", scalar_to_json(a.value)},
              {"eps", scalar_to_json(a.eps)},
              {"seed", a.seed},
              {"dtype", dtype_name(a.dtype)},
              {"name", a.name},
              {"function", a.function},
              {"k", a.k},
              {"largest", a.largest},
              {"scale", scalar_to_json(a.scale)},
              {"causal", a.causal},
              {"bottom_right", a.bottom_right},
              {"exclusive", a.exclusive},
              {"reverse", a.reverse},
              {"group", a.group},
              {"group_size", a.group_size},
              {"group_rank", a.group_rank},
              {"reduction", a.reduction},
              {"peer", a.peer}};
}

double scalar_of(const json& object, const char* key) {
  require(object.contains(key), absl::StrCat("\"", key, "\" is missing"));
  absl::StatusOr<double> v = scalar_from_json(object[key]);
  require(v.ok(), absl::StrCat("\"", key, "\": not a number"));
  return *v;
}

ops::Attrs attrs_of(const json& j) {
  ops::Attrs a;
  a.shape = get<std::vector<int64_t>>(j, "shape");
  a.axes = get<std::vector<int>>(j, "axes");
  a.keepdims = get<bool>(j, "keepdims");
  a.axis = get<int>(j, "axis");
  a.start = get<int64_t>(j, "start");
  a.offsets = get<std::vector<int64_t>>(j, "offsets");
  a.stop = get<int64_t>(j, "stop");
  a.step = get<int64_t>(j, "step");
  a.value = scalar_of(j, "value");
  a.eps = scalar_of(j, "eps");
  a.seed = get<uint64_t>(j, "seed");
  a.dtype = dtype_of(j, "dtype");
  a.name = get<std::string>(j, "name");
  a.function = get<int>(j, "function");
  a.k = get<int64_t>(j, "k");
  a.largest = get<bool>(j, "largest");
  a.scale = scalar_of(j, "scale");
  a.causal = get<bool>(j, "causal");
  a.bottom_right = get<bool>(j, "bottom_right");
  a.exclusive = get<bool>(j, "exclusive");
  a.reverse = get<bool>(j, "reverse");
  a.group = get<int>(j, "group");
  a.group_size = get<int>(j, "group_size");
  a.group_rank = get<int>(j, "group_rank");
  a.reduction = get<int>(j, "reduction");
  a.peer = get<int>(j, "peer");
  return a;
}

json instr_json(const Instr& in) {
  return json{{"kind", kInstrKindNames[static_cast<size_t>(in.kind)]},
              {"op", ops::op_name(in.op)},
              {"dtype", dtype_name(in.dtype)},
              {"space", in.space},
              {"operands", in.operands},
              {"input", in.input},
              {"view", in.view},
              {"param", in.param},
              {"function", in.function}};
}

Instr instr_of(const json& j) {
  Instr in;
  in.kind =
      enum_from_name<InstrKind>(kInstrKindNames, get<std::string>(j, "kind"), "instruction kind");
  in.op = op_of(j, "op");
  in.dtype = dtype_of(j, "dtype");
  in.space = get<int>(j, "space");
  const std::vector<int> operands = get<std::vector<int>>(j, "operands");
  require(operands.size() == in.operands.size(), "\"operands\" must hold 3 entries");
  std::copy(operands.begin(), operands.end(), in.operands.begin());
  in.input = get<int>(j, "input");
  in.view = get<int>(j, "view");
  in.param = get<int>(j, "param");
  in.function = get<int>(j, "function");
  return in;
}

// -1 (none) or an index below `size`.
bool optional_index(int index, size_t size) {
  return index == -1 || (index >= 0 && static_cast<size_t>(index) < size);
}

bool index_below(int64_t index, size_t size) {
  return index >= 0 && static_cast<uint64_t>(index) < size;
}

// How many anchor operands each anchor kind takes: [least, most].
std::pair<size_t, size_t> anchor_operand_counts(AnchorKind anchor) {
  switch (anchor) {
    case AnchorKind::kNone:
      return {0, 0};
    case AnchorKind::kRowNorm:
      return {1, 3};
    case AnchorKind::kMatmul:
      return {2, 2};
    case AnchorKind::kConcat:
      return {1, 1024};
    case AnchorKind::kAttention:
      return {3, 4};
    case AnchorKind::kReduce:
    case AnchorKind::kArgReduce:
    case AnchorKind::kScan:
    case AnchorKind::kTopk:
    case AnchorKind::kUpdateSlice:
    case AnchorKind::kIndexAdd:
    case AnchorKind::kCustomKernel:
    case AnchorKind::kCollective:
      return {1, 1};
  }
  return {0, 0};
}

// The operands each instruction kind reads: the first `n` are instructions, the rest -1.
int operand_count(InstrKind kind) {
  switch (kind) {
    case InstrKind::kUnary:
    case InstrKind::kCast:
    case InstrKind::kGather:
      return 1;
    case InstrKind::kBinary:
      return 2;
    case InstrKind::kWhere:
      return 3;
    case InstrKind::kLoad:
    case InstrKind::kParam:
    case InstrKind::kIndexLeaf:
    case InstrKind::kAnchor:
    case InstrKind::kCustom:
      return 0;
  }
  return 0;
}

// The structure every executor relies on: each index within what it indexes, operands of the
// right number and in their user's space, views of their space's rank, stores of space-0
// values, anchor operands in their own spaces. (What the values mean, and whether strides stay
// inside buffers, is the planner's: a bundle is trusted as the application's own binaries
// are, and its checksums catch damage.)
void check_program(const KernelProgram& p) {
  for (int rank : p.space_ranks) require(rank >= 0 && rank <= ops::kMaxRank, "a space's rank");
  require(!p.space_ranks.empty(), "a program needs its output space");
  for (const ViewPattern& v : p.view_patterns) {
    require(v.rank >= 0 && v.rank <= ops::kMaxRank, "a view's rank");
    for (int d : v.broadcast_dims) require(index_below(d, v.rank), "a view's broadcast dims");
  }
  require(p.num_params >= 0 && p.num_params <= (1 << 20), "\"num_params\"");
  const auto [least, most] = anchor_operand_counts(p.anchor);
  require(p.anchor_operands.size() >= least && p.anchor_operands.size() <= most &&
              p.space_ranks.size() == p.anchor_operands.size() + 1,
          "the anchor's operands and spaces do not match its kind");
  require(p.anchor != AnchorKind::kCustomKernel && p.anchor != AnchorKind::kCollective,
          "user kernels and collectives are not held in bundles");
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    const std::string at = absl::StrCat("instruction %", i, ": ");
    require(index_below(in.space, p.space_ranks.size()), at + "its space");
    const int reads = operand_count(in.kind);
    for (int k = 0; k < 3; ++k) {
      const int o = in.operands[k];
      if (k < reads) {
        require(index_below(o, i) && p.instrs[o].space == in.space,
                at + "an operand missing, after its user or in another space");
      } else {
        require(o == -1, at + "an operand its kind does not take");
      }
    }
    require(in.kind != InstrKind::kCustom && in.function == -1,
            at + "custom functions are not held in bundles");
    require(in.kind != InstrKind::kAnchor ||
                (p.anchor != AnchorKind::kNone &&
                 (in.space == 0 || (p.anchor == AnchorKind::kAttention && in.space == 4))),
            at + "an anchor result outside its epilogue");
    const bool loads = in.kind == InstrKind::kLoad || in.kind == InstrKind::kGather;
    require(loads ? index_below(in.input, p.input_dtypes.size()) : in.input == -1,
            at + "its input slot");
    const bool viewed = loads || in.kind == InstrKind::kIndexLeaf;
    require(viewed ? index_below(in.view, p.view_patterns.size()) : in.view == -1,
            at + "its view slot");
    require(!viewed || p.view_patterns[in.view].rank == p.space_ranks[in.space],
            at + "a view of another rank than its space");
    require(optional_index(in.param, static_cast<size_t>(p.num_params)) &&
                (in.param >= 0 || in.kind != InstrKind::kParam),
            at + "its parameter slot");
  }
  for (const Store& s : p.stores) {
    require(index_below(s.value, p.instrs.size()) && p.instrs[s.value].space == 0 &&
                index_below(s.output, p.output_dtypes.size()),
            "a store's value (a space-0 instruction) or output slot");
  }
  for (size_t k = 0; k < p.anchor_operands.size(); ++k) {
    const int o = p.anchor_operands[k];
    require(index_below(o, p.instrs.size()) && p.instrs[o].space == static_cast<int>(k) + 1,
            "an anchor operand outside its own space");
  }
  // The anchor's axis lies within the space it walks (the operand's; concat: the output's).
  if (p.anchor != AnchorKind::kNone && p.anchor != AnchorKind::kMatmul &&
      p.anchor != AnchorKind::kAttention) {
    const int rank = p.space_ranks[p.anchor == AnchorKind::kConcat ? 0 : 1];
    require(index_below(p.anchor_attrs.axis, static_cast<size_t>(std::max(rank, 1))),
            "the anchor's axis");
    for (int a : p.anchor_attrs.axes) require(index_below(a, rank), "the anchor's axes");
  }
  if (p.anchor == AnchorKind::kMatmul) {
    require(p.space_ranks[1] >= 1 && p.space_ranks[2] >= 1, "a matmul operand's rank");
  }
  require(optional_index(p.anchor_param, static_cast<size_t>(p.num_params)), "\"anchor_param\"");
  require(optional_index(p.anchor_start_input, p.input_dtypes.size()) &&
              optional_index(p.anchor_index_input, p.input_dtypes.size()),
          "the anchor's input slots");
  if (output_starts_as_input(p)) {
    require(!p.input_dtypes.empty() && !p.output_dtypes.empty(),
            "update_slice and index_add need their x and their output");
  }
  if (p.anchor == AnchorKind::kUpdateSlice) {
    require(p.anchor_start_input >= 0 || p.anchor_param >= 0, "update_slice's start");
  }
  if (p.anchor == AnchorKind::kIndexAdd) {
    require(p.anchor_index_input >= 0, "index_add's indices");
  }
}

json launch_json(const KernelLaunch& l) {
  json views = json::array();
  for (const ViewParams& v : l.views) {
    views.push_back({{"strides", v.strides},
                     {"offset", v.offset},
                     {"gather_stride", v.gather_stride},
                     {"gather_extent", v.gather_extent}});
  }
  return json{{"spaces", l.spaces},   {"views", views},     {"inputs", l.inputs},
              {"outputs", l.outputs}, {"params", l.params}, {"nodes", l.nodes}};
}

KernelLaunch launch_of(const json& j, const KernelProgram& p, size_t plan_buffers) {
  KernelLaunch l;
  l.spaces = get<std::vector<ops::Shape>>(j, "spaces");
  require(l.spaces.size() == p.space_ranks.size(), "the launch's spaces");
  for (size_t s = 0; s < l.spaces.size(); ++s) {
    require(l.spaces[s].size() == static_cast<size_t>(p.space_ranks[s]), "a space's rank");
    for (int64_t extent : l.spaces[s]) require(extent >= 0, "a space's extent");
  }
  const json& views = member(j, "views");
  require(views.is_array() && views.size() == p.view_patterns.size(), "the launch's views");
  for (size_t v = 0; v < views.size(); ++v) {
    ViewParams view;
    view.strides = get<std::vector<int64_t>>(views[v], "strides");
    view.offset = get<int64_t>(views[v], "offset");
    view.gather_stride = get<int64_t>(views[v], "gather_stride");
    view.gather_extent = get<int64_t>(views[v], "gather_extent");
    require(view.strides.size() == static_cast<size_t>(p.view_patterns[v].rank),
            "a view's strides");
    l.views.push_back(std::move(view));
  }
  l.inputs = get<std::vector<int>>(j, "inputs");
  l.outputs = get<std::vector<int>>(j, "outputs");
  l.params = get<std::vector<int>>(j, "params");
  l.nodes = get<std::vector<int>>(j, "nodes");
  require(l.inputs.size() == p.input_dtypes.size() && l.outputs.size() == p.output_dtypes.size() &&
              l.params.size() == static_cast<size_t>(p.num_params),
          "the launch's slots do not match its program's");
  for (const std::vector<int>* buffers : {&l.inputs, &l.outputs, &l.nodes}) {
    for (int n : *buffers) require(index_below(n, plan_buffers), "a plan buffer");
  }
  for (int t : l.params) require(t >= 0, "a trace parameter");
  return l;
}

// The plan run in the order of its kernels over which buffers hold a value: a kernel reads
// only an input or what an earlier kernel wrote and nobody released; a released buffer is an
// intermediate (never an input, whose memory is the caller's or a captured weight, nor an
// output); every output is written.
void check_data_flow(const LaunchPlan& plan) {
  std::vector<char> live(plan.node_bytes.size(), 0), kept(plan.node_bytes.size(), 0);
  for (int n : plan.input_nodes) live[n] = kept[n] = 1;
  for (int n : plan.outputs) kept[n] = 1;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (int n : plan.kernels[k].launch.inputs) {
      require(live[n] != 0, absl::StrCat("kernel ", k, " reads a buffer nothing wrote"));
    }
    for (int n : plan.kernels[k].launch.outputs) live[n] = 1;
    for (int n : plan.release_after[k]) {
      require(kept[n] == 0, absl::StrCat("kernel ", k, " releases an input or an output"));
      live[n] = 0;
    }
  }
  for (int n : plan.outputs) require(live[n] != 0, "a plan output nothing wrote");
}

template <class Fn>
auto reading(Fn&& read) -> absl::StatusOr<decltype(read())> {
  try {
    return read();
  } catch (const FormatError& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

}  // namespace

json program_to_json(const KernelProgram& p) {
  json instrs = json::array(), stores = json::array(), views = json::array();
  for (const Instr& in : p.instrs) instrs.push_back(instr_json(in));
  for (const Store& s : p.stores) stores.push_back({{"value", s.value}, {"output", s.output}});
  for (const ViewPattern& v : p.view_patterns) {
    views.push_back({{"rank", v.rank},
                     {"access", kViewAccessNames[static_cast<size_t>(v.access)]},
                     {"broadcast_dims", v.broadcast_dims}});
  }
  return json{{"name", p.name},
              {"anchor", anchor_name(p.anchor)},
              {"anchor_op", ops::op_name(p.anchor_op)},
              {"anchor_attrs", attrs_json(p.anchor_attrs)},
              {"anchor_dtype", dtype_name(p.anchor_dtype)},
              {"anchor_operands", p.anchor_operands},
              {"anchor_param", p.anchor_param},
              {"anchor_start_input", p.anchor_start_input},
              {"anchor_index_input", p.anchor_index_input},
              {"space_ranks", p.space_ranks},
              {"input_dtypes", dtype_names(p.input_dtypes)},
              {"output_dtypes", dtype_names(p.output_dtypes)},
              {"view_patterns", views},
              {"num_params", p.num_params},
              {"instrs", instrs},
              {"stores", stores}};
}

absl::StatusOr<KernelProgram> program_from_json(const json& j) {
  return reading([&] {
    KernelProgram p;
    p.name = get<std::string>(j, "name");
    p.anchor = anchor_from_name(get<std::string>(j, "anchor"));
    p.anchor_op = op_of(j, "anchor_op");
    require(j.contains("anchor_attrs"), "\"anchor_attrs\" is missing");
    p.anchor_attrs = attrs_of(j["anchor_attrs"]);
    p.anchor_dtype = dtype_of(j, "anchor_dtype");
    p.anchor_operands = get<std::vector<int>>(j, "anchor_operands");
    p.anchor_param = get<int>(j, "anchor_param");
    p.anchor_start_input = get<int>(j, "anchor_start_input");
    p.anchor_index_input = get<int>(j, "anchor_index_input");
    p.space_ranks = get<std::vector<int>>(j, "space_ranks");
    p.input_dtypes = dtypes_of(j, "input_dtypes");
    p.output_dtypes = dtypes_of(j, "output_dtypes");
    const json& views = member(j, "view_patterns");
    require(views.is_array(), "\"view_patterns\" must be an array");
    for (const json& v : views) {
      ViewPattern pattern;
      pattern.rank = get<int>(v, "rank");
      pattern.access = enum_from_name<ViewAccess>(kViewAccessNames, get<std::string>(v, "access"),
                                                  "view access");
      pattern.broadcast_dims = get<std::vector<int>>(v, "broadcast_dims");
      p.view_patterns.push_back(std::move(pattern));
    }
    p.num_params = get<int>(j, "num_params");
    const json& instrs = member(j, "instrs");
    const json& stores = member(j, "stores");
    require(instrs.is_array() && stores.is_array(), "\"instrs\" and \"stores\" must be arrays");
    for (const json& in : instrs) p.instrs.push_back(instr_of(in));
    for (const json& s : stores) p.stores.push_back({get<int>(s, "value"), get<int>(s, "output")});
    check_program(p);
    return p;
  });
}

json plan_to_json(const LaunchPlan& plan, const std::vector<int>& program_index) {
  json kernels = json::array();
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    kernels.push_back(
        {{"program", program_index[k]}, {"launch", launch_json(plan.kernels[k].launch)}});
  }
  return json{{"kernels", kernels},
              {"release_after", plan.release_after},
              {"outputs", plan.outputs},
              {"input_nodes", plan.input_nodes},
              {"node_bytes", plan.node_bytes},
              {"description", plan.description}};
}

absl::StatusOr<LaunchPlan> plan_from_json(
    const json& j, const std::vector<std::shared_ptr<const KernelProgram>>& programs) {
  return reading([&] {
    LaunchPlan plan;
    plan.node_bytes = get<std::vector<int64_t>>(j, "node_bytes");
    const size_t buffers = plan.node_bytes.size();
    for (int64_t bytes : plan.node_bytes) require(bytes >= 0, "a plan buffer's size");
    const json& kernels = member(j, "kernels");
    require(kernels.is_array(), "\"kernels\" must be an array");
    for (size_t k = 0; k < kernels.size(); ++k) {
      const int program = get<int>(kernels[k], "program");
      require(index_below(program, programs.size()), absl::StrCat("kernel ", k, "'s program"));
      require(kernels[k].contains("launch"), absl::StrCat("kernel ", k, "'s launch is missing"));
      PlannedKernel pk;
      pk.program = programs[program];
      pk.launch = launch_of(kernels[k]["launch"], *pk.program, buffers);
      plan.kernels.push_back(std::move(pk));
    }
    plan.release_after = get<std::vector<std::vector<int>>>(j, "release_after");
    plan.outputs = get<std::vector<int>>(j, "outputs");
    plan.input_nodes = get<std::vector<int>>(j, "input_nodes");
    plan.description = get<std::string>(j, "description");
    require(plan.release_after.size() == plan.kernels.size(), "\"release_after\"");
    for (const auto& released : plan.release_after) {
      for (int n : released) require(index_below(n, buffers), "a released plan buffer");
    }
    for (int n : plan.outputs) require(index_below(n, buffers), "a plan output");
    for (int n : plan.input_nodes) require(index_below(n, buffers), "a plan input");
    check_data_flow(plan);
    return plan;
  });
}

}  // namespace kiln::jit
