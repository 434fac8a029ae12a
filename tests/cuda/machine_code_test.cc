// The machine code of the CUDA kernels, checked without a GPU: each
// family's representative kernel is compiled by NVRTC for sm_90 in f32 and bf16, ptxas
// reports its resources (-Xptxas -v) and cuobjdump disassembles its cubin. The assertions
// are the properties that decide speed on Hopper and that a code change can silently lose:
// no spills, no FP64 where the data is not f64, 16-byte accesses in contiguous pointwise
// kernels, tensor cores in 16-bit matmuls and attention, and a budget of SASS instructions
// per element for the memory-bound families. It also prints, per kernel, the numbers of
// bench/RESULTS.md's static performance model.
//
// cuobjdump is not part of the toolkit's NVRTC install: scripts/install-deps.sh puts the PyPI
// wheel nvidia-cuda-cuobjdump under ~/.cache/kiln/tools/cuobjdump (KILN_CUOBJDUMP overrides).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/nn.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "tests/quantized_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr int kArch = 90;

// cuobjdump: $KILN_CUOBJDUMP, the wheel install-deps.sh puts under ~/.cache/kiln/tools, the
// toolkit's bin, then PATH. Empty when none is found.
std::string find_cuobjdump() {
  if (const char* env = std::getenv("KILN_CUOBJDUMP"); env != nullptr && *env != '\0') {
    return fs::exists(env) ? env : "";
  }
  std::vector<fs::path> candidates;
  if (const char* home = std::getenv("HOME")) {
    // The wheel's layout is nvidia/cu<major>/bin/cuobjdump (cu13 for CUDA 13).
    const fs::path nvidia = fs::path(home) / ".cache/kiln/tools/cuobjdump/nvidia";
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(nvidia, ec)) {
      candidates.push_back(entry.path() / "bin/cuobjdump");
    }
  }
  candidates.push_back("/usr/local/cuda/bin/cuobjdump");
  if (const char* path = std::getenv("PATH")) {
    for (std::string_view rest = path; !rest.empty();) {
      const size_t colon = rest.find(':');
      candidates.push_back(fs::path(std::string(rest.substr(0, colon))) / "cuobjdump");
      rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    }
  }
  for (const fs::path& p : candidates) {
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

// What ptxas reports for the entry point (-Xptxas -v), and for every function of the module
// the spills (a non-inlined device function spills on its own line).
struct Resources {
  int registers = -1;
  int shared_bytes = 0;  // static shared memory
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

Resources parse_ptxas_log(const std::string& log) {
  Resources r;
  std::smatch m;
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), frame); it != std::sregex_iterator();
       ++it) {
    r.stack_bytes = std::max(r.stack_bytes, std::stoi((*it)[1]));
    r.spill_store_bytes += std::stoi((*it)[2]);
    r.spill_load_bytes += std::stoi((*it)[3]);
  }
  static const std::regex used(R"(Used (\d+) registers)");
  if (std::regex_search(log, m, used)) r.registers = std::stoi(m[1]);
  static const std::regex smem(R"((\d+) bytes smem)");
  if (std::regex_search(log, m, smem)) r.shared_bytes = std::stoi(m[1]);
  return r;
}

// One SASS instruction: its address, opcode with modifiers ("LDG.E.128"), the predicate-free
// text, and a branch's target address (-1 otherwise).
struct Instruction {
  int address = 0;
  std::string opcode;
  std::string text;
  int target = -1;
};

std::vector<Instruction> parse_sass(const std::string& sass) {
  std::vector<Instruction> out;
  static const std::regex line(
      R"(/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);)");
  static const std::regex target(R"(0x([0-9a-f]+))");
  for (auto it = std::sregex_iterator(sass.begin(), sass.end(), line); it != std::sregex_iterator();
       ++it) {
    Instruction ins;
    ins.address = std::stoi((*it)[1], nullptr, 16);
    ins.opcode = (*it)[3];
    ins.text = ins.opcode + std::string((*it)[4]);
    std::smatch t;
    const std::string operands = (*it)[4];
    if ((ins.opcode.rfind("BRA", 0) == 0 || ins.opcode.rfind("BRX", 0) == 0) &&
        std::regex_search(operands, t, target)) {
      ins.target = std::stoi(t[1], nullptr, 16);
    }
    out.push_back(std::move(ins));
  }
  return out;
}

struct Compiled {
  std::string label;  // "softmax bf16"
  std::string source;
  std::string ptxas_log;
  std::string sass;
  Resources resources;
  std::vector<Instruction> instructions;
};

// Runs `command`, returning its standard output (and the exit status through `status`).
std::string run_command(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  *status = pclose(pipe);
  return out;
}

// The program of `t`'s plan whose anchor is `anchor` (the last such kernel: a fused prologue
// or a gather after it runs in other kernels).
std::shared_ptr<const jit::KernelProgram> program_of(const Tensor& t, jit::AnchorKind anchor,
                                                     const std::string& name_part) {
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(t).get()});
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  std::shared_ptr<const jit::KernelProgram> found;
  for (const jit::PlannedKernel& k : plan->kernels) {
    if (k.program->anchor == anchor && k.program->name.find(name_part) != std::string::npos) {
      found = k.program;
    }
  }
  return found;
}

Compiled compile_and_disassemble(const std::string& label, const jit::KernelProgram& p,
                                 const std::string& cuobjdump, int arch = kArch) {
  Compiled c;
  c.label = label;
  c.source = runtime::cuda::render_cuda(p, runtime::cuda::IndexWidths::k32);
  absl::StatusOr<runtime::cuda::CubinWithPtxasLog> cubin =
      runtime::cuda::compile_to_cubin_with_ptxas_log(c.source, runtime::cuda::entry_name(p, false),
                                                     arch);
  EXPECT_TRUE(cubin.ok()) << label << ": " << cubin.status();
  if (!cubin.ok()) return c;
  c.ptxas_log = cubin->log;
  c.resources = parse_ptxas_log(c.ptxas_log);
  const std::string path = absl::StrCat(::testing::TempDir(), "/kiln_machine_code_", getpid(), "_",
                                        p.name, "_sm", arch, ".cubin");
  std::ofstream(path, std::ios::binary) << cubin->cubin;
  int status = 0;
  c.sass = run_command(absl::StrCat("'", cuobjdump, "' -sass '", path, "' 2>&1"), &status);
  EXPECT_EQ(status, 0) << label << ": " << c.sass;
  fs::remove(path);
  c.instructions = parse_sass(c.sass);
  EXPECT_GT(c.instructions.size(), 10u) << label << ": no SASS read from\n" << c.sass;
  return c;
}

// A loop of the SASS: a backward branch and the instructions from its target to it. Innermost
// loops hold no other loop: a grid-stride or row loop after the compiler unrolled it.
struct Loop {
  int begin = 0, end = 0;  // indices into the instructions, inclusive
  bool innermost = true;
  int instructions() const { return end - begin + 1; }
};

std::vector<Loop> loops_of(const std::vector<Instruction>& ins) {
  std::vector<Loop> loops;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].target < 0 || ins[i].target > ins[i].address) continue;
    Loop l;
    l.end = static_cast<int>(i);
    while (l.begin < l.end && ins[l.begin].address < ins[i].target) ++l.begin;
    // The branch to itself after EXIT (it stops prefetching past the end) is no loop.
    if (l.begin < l.end) loops.push_back(l);
  }
  for (Loop& a : loops) {
    for (const Loop& b : loops) {
      if (&a != &b && b.begin >= a.begin && b.end <= a.end) a.innermost = false;
    }
  }
  return loops;
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// Whether an instruction runs on the FP64 units: double arithmetic and compares, conversions
// to or from double, and the 64-bit MUFU seeds (RCP64H, RSQ64H). DEPBAR starts with D too.
bool is_fp64(const std::string& op) {
  for (std::string_view p : {"DADD", "DMUL", "DFMA", "DSETP", "DSET.", "DMNMX", "DMMA"}) {
    if (starts_with(op, p)) return true;
  }
  return op.find(".F64") != std::string::npos || op.find("64H") != std::string::npos;
}

// The bytes one memory instruction moves per thread: LDG.E.128 16, LDG.E.64 8, LDG.E.U16 2,
// LDG.E 4.
int access_bytes(const std::string& op) {
  if (op.find(".128") != std::string::npos) return 16;
  if (op.find(".64") != std::string::npos) return 8;
  if (op.find("U16") != std::string::npos || op.find("S16") != std::string::npos) return 2;
  if (op.find("U8") != std::string::npos || op.find("S8") != std::string::npos) return 1;
  return 4;
}

// Elements one iteration of `loop` handles, for data of `element_bytes`: for each kind of
// access (LDG, STG, LDS, STS) the elements it moves, and the least of those. The least, not
// the most: a layer_norm pass loads x, weight and bias for one element, and a bf16 row cache
// may hold f32 (two elements' bytes per element). At least 1.
int elements_per_iteration(const std::vector<Instruction>& ins, const Loop& loop,
                           int element_bytes) {
  std::map<std::string, int> bytes;
  for (int i = loop.begin; i <= loop.end; ++i) {
    const std::string& op = ins[i].opcode;
    for (const char* kind : {"LDG", "STG", "LDS", "STS"}) {
      if (starts_with(op, kind) && !starts_with(op, "LDSM") && !starts_with(op, "LDGSTS")) {
        bytes[kind] += access_bytes(op);
      }
    }
  }
  int elements = 0;
  for (const auto& [kind, n] : bytes) {
    const int e = std::max(1, n / element_bytes);
    elements = elements == 0 ? e : std::min(elements, e);
  }
  return std::max(1, elements);
}

// Whether `loop` reads or writes the kernel's data in global memory: an access of one element
// (LDG.E for f32, LDG.E.U16 for bf16) or of 16 bytes. Not a loop that only moves 8-byte
// values of another type: a split reduction's phase 2 folding partial results, topk's i64
// indices.
bool touches_global_data(const std::vector<Instruction>& ins, const Loop& loop, int element_bytes) {
  for (int i = loop.begin; i <= loop.end; ++i) {
    const std::string& op = ins[i].opcode;
    if ((starts_with(op, "LDG") || starts_with(op, "STG")) && !starts_with(op, "LDGSTS") &&
        (access_bytes(op) == element_bytes || access_bytes(op) == 16)) {
      return true;
    }
  }
  return false;
}

// The innermost loops, one a line: addresses, instructions, elements per iteration and the
// memory instructions: for a failure message, to see which loop grew.
std::string describe_loops(const std::vector<Instruction>& ins, int element_bytes) {
  std::string out;
  for (const Loop& l : loops_of(ins)) {
    if (!l.innermost) continue;
    std::map<std::string, int> memory;
    for (int i = l.begin; i <= l.end; ++i) {
      const std::string& op = ins[i].opcode;
      if (starts_with(op, "LD") || starts_with(op, "ST")) ++memory[op];
    }
    absl::StrAppend(&out,
                    absl::StrFormat("  loop %04x-%04x: %d instructions, %d elements, ",
                                    ins[l.begin].address, ins[l.end].address, l.instructions(),
                                    elements_per_iteration(ins, l, element_bytes)));
    for (const auto& [op, n] : memory) absl::StrAppend(&out, op, " x", n, " ");
    absl::StrAppend(&out, touches_global_data(ins, l, element_bytes) ? "(counted)\n" : "\n");
  }
  return out;
}

// How a family's SASS instructions per element are counted. Only innermost loops over the
// kernel's data in global memory count (touches_global_data), each as its instructions over
// its elements per iteration (elements_per_iteration).
enum class PerElement {
  kNone,       // compute-bound (matmul, attention): not counted
  kHotLoop,    // the loop a large tensor spends its time in: of the loops with 16-byte
               // accesses if any (so not a scalar tail or a split reduction's phase 2), the
               // one with the most elements per iteration (the unrolled one), of equals the
               // longest. Pointwise, reductions, concat, cumsum, topk, update_slice.
  kEveryPass,  // a row norm's passes (max, sum, write), which each run once per element:
               // consecutive loops with the same kinds of access (LDG, STG, LDS, STS) are one
               // pass (a vector loop and its scalar tail), counted as its hot loop; the sum.
};

struct Case {
  std::string family;
  DType dtype;
  Tensor result;
  jit::AnchorKind anchor;
  std::string name_part;  // picks the kernel among the plan's by name ("" for any)
  PerElement per_element;
  int streams;  // elements read and written in global memory per element (for the model)
};

// Instructions per element of a compiled kernel (0 for kNone), and the FP64 ones among them.
struct ElementCost {
  double instructions = 0;
  double fp64 = 0;
};

ElementCost element_cost(const std::vector<Instruction>& ins, PerElement how, int element_bytes) {
  struct Counted {
    ElementCost cost;
    int elements, size;
    bool vector;
    std::string kinds;  // which of LDG, STG, LDS, STS it has
  };
  std::vector<Counted> counted;
  for (const Loop& l : loops_of(ins)) {
    if (how == PerElement::kNone || !l.innermost || !touches_global_data(ins, l, element_bytes)) {
      continue;
    }
    Counted c{{}, elements_per_iteration(ins, l, element_bytes), l.instructions(), false, ""};
    std::set<std::string> kinds;
    int fp64 = 0;
    for (int i = l.begin; i <= l.end; ++i) {
      const std::string& op = ins[i].opcode;
      fp64 += is_fp64(op) ? 1 : 0;
      for (const char* kind : {"LDG", "STG", "LDS", "STS"}) {
        if (starts_with(op, kind)) kinds.insert(kind);
      }
      c.vector |= (starts_with(op, "LDG") || starts_with(op, "STG")) && access_bytes(op) == 16;
    }
    c.kinds = absl::StrJoin(kinds, ",");
    c.cost = {static_cast<double>(c.size) / c.elements, static_cast<double>(fp64) / c.elements};
    counted.push_back(std::move(c));
  }
  auto hotter = [](const Counted& a, const Counted& b) {  // whether a is the hot one of the two
    if (a.vector != b.vector) return a.vector;
    return a.elements != b.elements ? a.elements > b.elements : a.size > b.size;
  };
  ElementCost total;
  if (how == PerElement::kHotLoop) {
    const Counted* hot = nullptr;
    for (const Counted& c : counted) {
      if (hot == nullptr || hotter(c, *hot)) hot = &c;
    }
    if (hot != nullptr) total = hot->cost;
  } else {
    for (size_t i = 0; i < counted.size();) {
      const Counted* hot = &counted[i];
      size_t j = i + 1;
      for (; j < counted.size() && counted[j].kinds == counted[i].kinds; ++j) {
        if (hotter(counted[j], *hot)) hot = &counted[j];
      }
      total.instructions += hot->cost.instructions;
      total.fp64 += hot->cost.fp64;
      i = j;
    }
  }
  return total;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  using jit::AnchorKind;
  for (DType dt : {DType::F32, DType::BF16}) {
    // Shapes only need to pick the kernel form a large tensor gets: the source depends on
    // ranks, dtypes and layout, never on sizes.
    Tensor x = Tensor::randn({64, 64}, 1, dt).eval();
    Tensor w = Tensor::randn({64}, 2, dt).eval();
    Tensor v = Tensor::randn({4, 64, 64}, 3, dt).eval();
    Tensor q = Tensor::randn({1, 4, 96, 64}, 4, dt).eval();
    Tensor k = Tensor::randn({1, 4, 80, 64}, 5, dt).eval();
    auto add = [&](std::string family, Tensor t, AnchorKind anchor, std::string name_part,
                   PerElement how, int streams) {
      out.push_back(
          {std::move(family), dt, std::move(t), anchor, std::move(name_part), how, streams});
    };
    add("pointwise", relu(x * 2.0 + 1.0), AnchorKind::kNone, "", PerElement::kHotLoop, 2);
    add("pointwise_bias", x + w, AnchorKind::kNone, "", PerElement::kHotLoop, 2);
    add("reduce_inner", sum(x, {1}), AnchorKind::kReduce, "", PerElement::kHotLoop, 1);
    add("reduce_outer", sum(x, {0}), AnchorKind::kReduce, "", PerElement::kHotLoop, 1);
    add("argmax", argmax(x, 1), AnchorKind::kArgReduce, "", PerElement::kHotLoop, 1);
    // k-means' nearest center: a sum of two coordinates unrolled into the argmin's operand
    // (jit/fusion/short_sum.h), which must add in f32, not f64.
    add("argmin_short_sum",
        argmin(sum(square(v.reshape({256, 1, 32, 2}) - x.reshape({1, 64, 32, 2})), 3), 1),
        AnchorKind::kArgReduce, "sum", PerElement::kNone, 0);
    add("softmax", softmax(x), AnchorKind::kRowNorm, "softmax", PerElement::kEveryPass, 2);
    add("layer_norm", layer_norm(x, w, w), AnchorKind::kRowNorm, "layer_norm",
        PerElement::kEveryPass, 2);
    add("matmul", matmul(x, x), AnchorKind::kMatmul, "", PerElement::kNone, 0);
    // linear's transposed [out, in] weight: B k-contiguous.
    add("matmul_linear", linear(x, x), AnchorKind::kMatmul, "", PerElement::kNone, 0);
    add("attention", scaled_dot_product_attention(q, k, k, Tensor(), true), AnchorKind::kAttention,
        "", PerElement::kNone, 0);
    add("concat", concat({x, x}, 1), AnchorKind::kConcat, "", PerElement::kHotLoop, 2);
    add("cumsum", cumsum(x, 1), AnchorKind::kScan, "cumsum", PerElement::kHotLoop, 2);
    // Per element of the row per round: k rounds each select over the cached row.
    add("topk", topk(x, 4, 1).indices, AnchorKind::kTopk, "topk", PerElement::kHotLoop, 1);
    add("update_slice", update_slice(v, x.reshape({1, 64, 64}), 0, 2), AnchorKind::kUpdateSlice, "",
        PerElement::kHotLoop, 2);
  }
  // The narrow dtypes: 8-bit floats converted in registers (round to nearest even, saturate)
  // and 8-bit integers wrapped, with 16-byte accesses and no FP64.
  for (DType dt : {DType::F8E4M3, DType::I8}) {
    Tensor x = Tensor::randn({64, 64}, 1, DType::F32).astype(dt).eval();
    auto add = [&](std::string family, Tensor t, AnchorKind anchor, PerElement how, int streams) {
      out.push_back({std::move(family), dt, std::move(t), anchor, "", how, streams});
    };
    add("pointwise", relu(x * 2.0 + 1.0), AnchorKind::kNone, PerElement::kHotLoop, 2);
    add("reduce_inner", max(x, {1}), AnchorKind::kReduce, PerElement::kHotLoop, 1);
  }
  return out;
}

// Today's SASS instructions per element (2026-12-02: NVRTC 13.0 for sm_90, with the f32 row
// norms and reductions that need no FP64) plus a quarter, and at least one instruction: a
// change that adds index math, a conversion or a lost unroll to the loop a large tensor runs
// fails here, ptxas's scheduling noise does not. A change that makes a family cheaper lowers
// its budget with it. The numbers stand for what bandwidth allows (bench/RESULTS.md, "Static
// performance model"): at 4.3 TB/s an f32 kernel that reads and writes each element may
// spend about 62 instructions per element, a bf16 one 31.
double budget(const std::string& family, DType dt) {
  static const std::map<std::pair<std::string, DType>, double> budgets = {
      {{"pointwise", DType::F32}, 4.5},
      {{"pointwise", DType::BF16}, 18},
      {{"pointwise_bias", DType::F32}, 16},
      {{"pointwise_bias", DType::BF16}, 20},
      {{"reduce_inner", DType::F32}, 11},
      {{"reduce_inner", DType::BF16}, 12},
      {{"reduce_outer", DType::F32}, 12},
      {{"reduce_outer", DType::BF16}, 13},
      {{"argmax", DType::F32}, 24},
      {{"argmax", DType::BF16}, 24},
      {{"softmax", DType::F32}, 53},
      {{"softmax", DType::BF16}, 61},
      {{"layer_norm", DType::F32}, 34},
      {{"layer_norm", DType::BF16}, 30},
      {{"concat", DType::F32}, 10.5},
      {{"concat", DType::BF16}, 16.5},
      {{"cumsum", DType::F32}, 49},
      {{"cumsum", DType::BF16}, 47},
      {{"topk", DType::F32}, 50},
      {{"topk", DType::BF16}, 52},
      {{"update_slice", DType::F32}, 8},
      {{"update_slice", DType::BF16}, 12.5},
      // 2026-12-07: sm_90 converts the 8-bit floats in hardware (cvt.rn.satfinite), one
      // value per instruction; packing two per instruction would halve that part.
      {{"pointwise", DType::F8E4M3}, 33.5},
      {{"reduce_inner", DType::F8E4M3}, 24},
      {{"pointwise", DType::I8}, 13},
      {{"reduce_inner", DType::I8}, 17.5},
  };
  auto it = budgets.find({family, dt});
  return it == budgets.end() ? 0 : it->second;
}

struct Kernel {
  Case spec;
  std::string name;
  Compiled code;
  ElementCost cost;
};

// Every case compiled and disassembled once for the whole suite, or why it could not be.
struct Suite {
  std::string error;
  std::vector<Kernel> kernels;
};

const Suite& suite() {
  static const Suite* const s = [] {
    auto* s = new Suite;
    const std::string cuobjdump = find_cuobjdump();
    if (cuobjdump.empty()) {
      s->error =
          "cuobjdump not found. It comes from the PyPI wheels nvidia-cuda-cuobjdump and "
          "nvidia-cuda-nvdisasm (cuobjdump runs the nvdisasm beside it): run "
          "scripts/install-deps.sh, which installs them into ~/.cache/kiln/tools/cuobjdump, or "
          "set KILN_CUOBJDUMP to a cuobjdump binary";
      return s;
    }
    if (absl::Status st = runtime::cuda::nvrtc_available(); !st.ok()) {
      s->error = absl::StrCat(st.message(), " (the CUDA Toolkit's NVRTC must be installed)");
      return s;
    }
    for (const Case& c : cases()) {
      const std::string label = absl::StrCat(c.family, " ", dtype_name(c.dtype));
      std::shared_ptr<const jit::KernelProgram> p = program_of(c.result, c.anchor, c.name_part);
      if (p == nullptr) {
        ADD_FAILURE() << label << ": no " << c.name_part << " kernel in the plan";
        continue;
      }
      Kernel k{c, p->name, compile_and_disassemble(label, *p, cuobjdump), {}};
      k.cost = element_cost(k.code.instructions, c.per_element, dtype_size(c.dtype));
      s->kernels.push_back(std::move(k));
    }
    return s;
  }();
  return *s;
}

#define KILN_REQUIRE_SUITE() \
  ASSERT_TRUE(suite().error.empty()) << suite().error;  // not a skip: CI must have the tools

int count_opcodes(const Compiled& c, std::string_view prefix) {
  int n = 0;
  for (const Instruction& i : c.instructions) n += starts_with(i.opcode, prefix) ? 1 : 0;
  return n;
}

// A 16-bit matmul or attention kernel built for the hardware:
// tensor cores (HMMA) fed by cp.async (LDGSTS) and ldmatrix (LDSM), with no spills.
void expect_staged_on_tensor_cores(const Compiled& c, const std::string& label) {
  EXPECT_GT(count_opcodes(c, "HMMA"), 0) << label;
  EXPECT_GT(count_opcodes(c, "LDGSTS"), 0) << label;
  EXPECT_GT(count_opcodes(c, "LDSM"), 0) << label;
  EXPECT_EQ(c.resources.spill_store_bytes, 0) << label << "\n" << c.ptxas_log;
  EXPECT_EQ(c.resources.spill_load_bytes, 0) << label << "\n" << c.ptxas_log;
}

// Spilled registers go to local memory: a load and a store per spill, each as slow as a
// global access, in the loops that decide a kernel's speed.
TEST(MachineCode, NoKernelSpills) {
  KILN_REQUIRE_SUITE();
  for (const Kernel& k : suite().kernels) {
    EXPECT_GE(k.code.resources.registers, 0) << k.code.label << "\n" << k.code.ptxas_log;
    EXPECT_EQ(k.code.resources.spill_store_bytes, 0) << k.code.label << "\n" << k.code.ptxas_log;
    EXPECT_EQ(k.code.resources.spill_load_bytes, 0) << k.code.label << "\n" << k.code.ptxas_log;
  }
}

// Whether an FP64 instruction narrows a double to f32 or an integer (F2F.F32.F64,
// F2I.F64.TRUNC): what a kernel does with the scalars Params carries as doubles
// (kernel_args.h).
bool narrows_a_double(const std::string& op) {
  return starts_with(op, "F2F.F32.F64") || starts_with(op, "F2F.F16.F64") ||
         (starts_with(op, "F2I") && op.find(".F64") != std::string::npos);
}

// H100 and H200 run FP64 at half the FP32 rate, and a warp's FP64 instruction holds the issue
// slot FP32 work would use: data that is not f64 is computed in f32. The one exception is a
// double scalar parameter narrowed outside the innermost loops (once per thread or per row).
TEST(MachineCode, NoFp64WhereTheDataIsNotF64) {
  KILN_REQUIRE_SUITE();
  for (const Kernel& k : suite().kernels) {
    const std::vector<Instruction>& ins = k.code.instructions;
    std::vector<bool> in_inner_loop(ins.size());
    for (const Loop& l : loops_of(ins)) {
      for (int i = l.begin; l.innermost && i <= l.end; ++i) in_inner_loop[i] = true;
    }
    std::map<std::string, int> fp64;
    for (size_t i = 0; i < ins.size(); ++i) {
      const std::string& op = ins[i].opcode;
      if (is_fp64(op) && (in_inner_loop[i] || !narrows_a_double(op))) ++fp64[op];
    }
    std::string list;
    int total = 0;
    for (const auto& [op, n] : fp64) {
      absl::StrAppend(&list, list.empty() ? "" : ", ", op, " x", n);
      total += n;
    }
    EXPECT_TRUE(fp64.empty()) << k.code.label << " (" << k.name << "): " << total
                              << " FP64 instructions: " << list;
  }
}

// A contiguous pointwise kernel moves 16 bytes per access (LDG.E.128 and STG.E.128 on sm_90):
// a quarter of the memory instructions of 4-byte accesses, the difference between reaching
// HBM bandwidth or not at bf16.
TEST(MachineCode, ContiguousPointwiseKernelsUseSixteenByteAccesses) {
  KILN_REQUIRE_SUITE();
  int checked = 0;
  for (const Kernel& k : suite().kernels) {
    if (k.spec.family != "pointwise" && k.spec.family != "pointwise_bias") continue;
    ++checked;
    EXPECT_GT(count_opcodes(k.code, "LDG.E.128"), 0) << k.code.label << "\n" << k.code.sass;
    EXPECT_GT(count_opcodes(k.code, "STG.E.128"), 0) << k.code.label << "\n" << k.code.sass;
  }
  EXPECT_EQ(checked, 6);
}

// 16-bit matmul and attention run on tensor cores (HMMA), fed by cp.async (LDGSTS) and
// ldmatrix (LDSM).
TEST(MachineCode, SixteenBitMatmulAndAttentionUseTensorCores) {
  KILN_REQUIRE_SUITE();
  int checked = 0;
  for (const Kernel& k : suite().kernels) {
    const bool matmul = k.spec.family == "matmul" || k.spec.family == "matmul_linear";
    if (k.spec.dtype != DType::BF16 || (!matmul && k.spec.family != "attention")) continue;
    ++checked;
    const int hmma = count_opcodes(k.code, "HMMA"), ldgsts = count_opcodes(k.code, "LDGSTS"),
              ldsm = count_opcodes(k.code, "LDSM"), lds16 = count_opcodes(k.code, "LDS.U16");
    EXPECT_GT(hmma, 0) << k.code.label;
    EXPECT_GT(ldgsts, 0) << k.code.label;
    EXPECT_GT(ldsm, 0) << k.code.label;
    std::printf("%-20s HMMA %d, LDGSTS %d, LDSM %d, LDS.U16 %d\n", k.code.label.c_str(), hmma,
                ldgsts, ldsm, lds16);
  }
  EXPECT_EQ(checked, 3);
}

// Every 16-bit matmul core (f16 and bf16; B as [K, N] and as linear's [N, K] weight, with
// and without a fused epilogue) compiled for sm_80 and sm_90: cp.async staging (LDGSTS),
// ldmatrix fragments (LDSM), tensor cores (HMMA), no spills and no FP64. Also prints each
// one's registers, shared memory and the instructions of its k-loop (bench/RESULTS.md).
TEST(MachineCode, SixteenBitMatmulsStageWithCpAsyncAndLdmatrixOnSm80AndSm90) {
  KILN_REQUIRE_SUITE();
  const std::string cuobjdump = find_cuobjdump();
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor x = Tensor::randn({64, 64}, 1, dt).eval(), w = Tensor::randn({64, 64}, 2, dt).eval();
    Tensor bias = Tensor::randn({64}, 3, dt).eval();
    const std::vector<std::pair<std::string, Tensor>> kernels = {
        {"a.b", matmul(x, w)}, {"linear+bias,gelu", gelu(linear(x, w, bias))}};
    for (const auto& [what, t] : kernels) {
      std::shared_ptr<const jit::KernelProgram> p = program_of(t, jit::AnchorKind::kMatmul, "");
      ASSERT_NE(p, nullptr) << what;
      for (int arch : {80, 90}) {
        const std::string label = absl::StrCat(what, " ", dtype_name(dt), " sm_", arch);
        const Compiled c = compile_and_disassemble(label, *p, cuobjdump, arch);
        expect_staged_on_tensor_cores(c, label);
        const int hmma = count_opcodes(c, "HMMA"), ldgsts = count_opcodes(c, "LDGSTS"),
                  ldsm = count_opcodes(c, "LDSM");
        int fp64 = 0;
        for (const Instruction& i : c.instructions) fp64 += is_fp64(i.opcode) ? 1 : 0;
        EXPECT_EQ(fp64, 0) << label;
        // The k-loops (one per tile size): the loops with HMMA in them and in no loop inside
        // them; their staging loops (over the chunks or elements a thread copies) are inside.
        const std::vector<Loop> all = loops_of(c.instructions);
        auto count_in = [&](const Loop& l, std::string_view op) {
          int n = 0;
          for (int i = l.begin; i <= l.end; ++i) n += starts_with(c.instructions[i].opcode, op);
          return n;
        };
        std::string loops;
        for (const Loop& l : all) {
          if (count_in(l, "HMMA") == 0) continue;
          bool inner_hmma = false;
          for (const Loop& o : all) {
            inner_hmma |= &o != &l && o.begin >= l.begin && o.end <= l.end && count_in(o, "HMMA");
          }
          if (inner_hmma) continue;
          // The per-element staging runs in loops inside the k-loop; the cp.async path is
          // straight-line code, so what is outside the inner loops is what a k-step issues
          // on that path (both branches of its ifs counted: an upper bound).
          std::vector<bool> nested(c.instructions.size(), false);
          for (const Loop& o : all) {
            if (&o == &l || o.begin < l.begin || o.end > l.end) continue;
            for (int i = o.begin; i <= o.end; ++i) nested[i] = true;
          }
          int straight = 0;
          for (int i = l.begin; i <= l.end; ++i) straight += nested[i] ? 0 : 1;
          absl::StrAppend(&loops, "\n    k-loop: ", l.instructions(), " instructions (", straight,
                          " outside its inner loops), HMMA ", count_in(l, "HMMA"), ", LDSM ",
                          count_in(l, "LDSM"), ", LDGSTS ", count_in(l, "LDGSTS"), ", BAR ",
                          count_in(l, "BAR"), ", LDG ", count_in(l, "LDG") - count_in(l, "LDGSTS"),
                          ", STS ", count_in(l, "STS"));
        }
        std::printf("%-28s %d registers, %d B smem, HMMA %d, LDGSTS %d, LDSM %d%s\n", label.c_str(),
                    c.resources.registers, c.resources.shared_bytes, hmma, ldgsts, ldsm,
                    loops.c_str());
      }
    }
  }
}

// 8-bit float matmuls (e4m3 linear with a bias and relu, e5m2 a.b) on the tensor cores for
// sm_90 (and e4m3 for sm_80): HMMA fed by ldmatrix from f16 tiles staged element by element,
// no spills and no FP64.
TEST(MachineCode, EightBitFloatMatmulsUseTensorCoresOnSm80AndSm90) {
  KILN_REQUIRE_SUITE();
  const std::string cuobjdump = find_cuobjdump();
  auto input = [](std::vector<int64_t> shape, uint64_t seed, DType dt) {
    return Tensor::randn(std::move(shape), seed).astype(dt).eval();
  };
  const std::vector<std::pair<std::string, Tensor>> kernels = {
      {"linear+bias,relu f8e4m3",
       relu(linear(input({64, 64}, 1, DType::F8E4M3), input({64, 64}, 2, DType::F8E4M3),
                   input({64}, 3, DType::F8E4M3)))},
      {"a.b f8e5m2", matmul(input({64, 64}, 4, DType::F8E5M2), input({64, 64}, 5, DType::F8E5M2))}};
  for (const auto& [what, t] : kernels) {
    std::shared_ptr<const jit::KernelProgram> p = program_of(t, jit::AnchorKind::kMatmul, "");
    ASSERT_NE(p, nullptr) << what;
    for (int arch : {80, 90}) {
      if (arch == 80 && t.dtype() == DType::F8E5M2) continue;  // the same code as e4m3's there
      const std::string label = absl::StrCat(what, " sm_", arch);
      const Compiled c = compile_and_disassemble(label, *p, cuobjdump, arch);
      int fp64 = 0;
      for (const Instruction& i : c.instructions) fp64 += is_fp64(i.opcode) ? 1 : 0;
      EXPECT_GT(count_opcodes(c, "HMMA"), 0) << label;
      EXPECT_GT(count_opcodes(c, "LDSM"), 0) << label;
      EXPECT_EQ(fp64, 0) << label;
      EXPECT_EQ(c.resources.spill_store_bytes, 0) << label << "\n" << c.ptxas_log;
      EXPECT_EQ(c.resources.spill_load_bytes, 0) << label << "\n" << c.ptxas_log;
    }
  }
}

// The quantized matmul of every block format (linear with a bias and gelu fused, as a
// transformer's projections run) compiled for sm_90, two of them for sm_80 too: the weight's bytes
// staged by 16-byte cp.async (LDGSTS.E.BYPASS.128), the products by dp4a (IDP.4A), no spills and no
// FP64. Prints each one's registers, shared memory and instruction counts (docs/cuda.md).
TEST(MachineCode, QuantizedMatmulsStageWeightsWithSixteenByteCopiesAndMultiplyByDp4a) {
  KILN_REQUIRE_SUITE();
  const std::string cuobjdump = find_cuobjdump();
  std::mt19937_64 rng(1);
  Tensor x = Tensor::randn({64, 256}, 1).eval(), bias = Tensor::randn({64}, 2).eval();
  for (DType format : kBlockDTypes) {
    const Tensor w = testing::random_block_tensor(format, {64, 256}, rng);
    std::shared_ptr<const jit::KernelProgram> p =
        program_of(gelu(linear(x, w, bias)), jit::AnchorKind::kMatmul, "");
    ASSERT_NE(p, nullptr) << dtype_name(format);
    // Every format for sm_90; the code does not depend on the arch, so two formats for sm_80.
    for (int arch : {80, 90}) {
      if (arch == 80 && format != DType::Q4_0 && format != DType::Q4_K) continue;
      const std::string label = absl::StrCat("linear ", dtype_name(format), " sm_", arch);
      const Compiled c = compile_and_disassemble(label, *p, cuobjdump, arch);
      const int idp = count_opcodes(c, "IDP.4A"), copies = count_opcodes(c, "LDGSTS");
      int wide_copies = 0, fp64 = 0;
      for (const Instruction& i : c.instructions) {
        wide_copies += starts_with(i.opcode, "LDGSTS") && access_bytes(i.opcode) == 16;
        fp64 += is_fp64(i.opcode) ? 1 : 0;
      }
      EXPECT_GT(idp, 0) << label;
      EXPECT_GT(wide_copies, 0) << label << "\n" << c.sass;
      EXPECT_EQ(wide_copies, copies) << label << ": every weight copy moves 16 bytes";
      EXPECT_EQ(fp64, 0) << label;
      EXPECT_EQ(c.resources.spill_store_bytes, 0) << label << "\n" << c.ptxas_log;
      EXPECT_EQ(c.resources.spill_load_bytes, 0) << label << "\n" << c.ptxas_log;
      std::printf("%-20s %d registers, %d B smem, IDP.4A %d, LDGSTS.128 %d, %zu instructions\n",
                  label.c_str(), c.resources.registers, c.resources.shared_bytes, idp, wide_copies,
                  c.instructions.size());
    }
  }
}

// The tensor-core attention (f16 and bf16; plain, and with an additive mask, grouped-query
// heads and a causal cut, top-left or bottom-right) compiled for sm_80 and sm_90: K and V staged by
// cp.async (LDGSTS), fragments by ldmatrix (LDSM), tensor cores (HMMA), no spills and no FP64.
// Prints each one's registers and shared memory (bench/RESULTS.md).
TEST(MachineCode, SixteenBitAttentionStagesWithCpAsyncAndLdmatrixOnSm80AndSm90) {
  KILN_REQUIRE_SUITE();
  const std::string cuobjdump = find_cuobjdump();
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor q = Tensor::randn({1, 4, 96, 64}, 4, dt).eval();
    Tensor k = Tensor::randn({1, 2, 80, 64}, 5, dt).eval();
    Tensor mask = Tensor::randn({96, 80}, 6, dt).eval();
    const std::vector<std::pair<std::string, Tensor>> kernels = {
        {"attention", scaled_dot_product_attention(q, k, k)},
        {"attention+mask,causal", scaled_dot_product_attention(q, k, k, mask, true)},
        {"attention+mask,causal bottom-right",
         scaled_dot_product_attention(q, k, k, mask, CausalAlignment::BottomRight)}};
    for (const auto& [what, t] : kernels) {
      std::shared_ptr<const jit::KernelProgram> p = program_of(t, jit::AnchorKind::kAttention, "");
      ASSERT_NE(p, nullptr) << what;
      for (int arch : {80, 90}) {
        const std::string label = absl::StrCat(what, " ", dtype_name(dt), " sm_", arch);
        const Compiled c = compile_and_disassemble(label, *p, cuobjdump, arch);
        expect_staged_on_tensor_cores(c, label);
        const int hmma = count_opcodes(c, "HMMA"), ldgsts = count_opcodes(c, "LDGSTS"),
                  ldsm = count_opcodes(c, "LDSM");
        // As NoFp64WhereTheDataIsNotF64: only the scale, a double parameter, narrowed outside
        // the innermost loops.
        std::vector<bool> in_inner_loop(c.instructions.size());
        for (const Loop& l : loops_of(c.instructions)) {
          for (int i = l.begin; l.innermost && i <= l.end; ++i) in_inner_loop[i] = true;
        }
        int fp64 = 0;
        for (size_t i = 0; i < c.instructions.size(); ++i) {
          const std::string& op = c.instructions[i].opcode;
          fp64 += is_fp64(op) && (in_inner_loop[i] || !narrows_a_double(op)) ? 1 : 0;
        }
        EXPECT_EQ(fp64, 0) << label;
        std::printf("%-34s %d registers, %d B smem, HMMA %d, LDGSTS %d, LDSM %d, LDS.U16 %d\n",
                    label.c_str(), c.resources.registers, c.resources.shared_bytes, hmma, ldgsts,
                    ldsm, count_opcodes(c, "LDS.U16"));
      }
    }
  }
}

// The memory-bound families stay within their SASS instructions per element (budget()).
TEST(MachineCode, MemoryBoundFamiliesStayWithinTheirInstructionBudget) {
  KILN_REQUIRE_SUITE();
  for (const Kernel& k : suite().kernels) {
    if (k.spec.per_element == PerElement::kNone) continue;
    const double limit = budget(k.spec.family, k.spec.dtype);
    EXPECT_GT(limit, 0) << k.code.label << ": no budget";
    EXPECT_GT(k.cost.instructions, 0) << k.code.label << ": no loop found in\n" << k.code.sass;
    EXPECT_LE(k.cost.instructions, limit)
        << k.code.label << " (" << k.name << "): " << k.cost.instructions
        << " SASS instructions per element, budget " << limit << "\n"
        << describe_loops(k.code.instructions, dtype_size(k.spec.dtype));
    if (std::getenv("KILN_SASS_VERBOSE") != nullptr) {
      std::printf("%s\n%s", k.code.label.c_str(),
                  describe_loops(k.code.instructions, dtype_size(k.spec.dtype)).c_str());
    }
  }
}

// bench/RESULTS.md's static performance model, printed as its table. The
// H100/H200 numbers (132 SMs; per SM 64K registers in 4 partitions, 64 warps, 32 blocks,
// 228 KiB shared memory with 1 KiB reserved per block; 4 schedulers issuing one warp
// instruction per clock at 1.98 GHz; FP64 at half rate, so an FP64 instruction counts
// twice) and 4.3 TB/s of HBM3e.
TEST(MachineCode, StaticPerformanceModel) {
  KILN_REQUIRE_SUITE();
  constexpr double kSms = 132, kClock = 1.98e9, kBandwidth = 4.3e12;
  constexpr double kIssueRate = kSms * 4 * 32 * kClock;  // thread instructions per second
  std::printf(
      "| kernel | registers | static smem (B) | blocks/SM | occupancy | SASS instr./element "
      "| FP64/element | issue-bound share of 4.3 TB/s |\n|---|---|---|---|---|---|---|---|\n");
  for (const Kernel& k : suite().kernels) {
    const Resources& r = k.code.resources;
    const int threads = runtime::cuda::kThreadsPerBlock, warps = threads / 32;
    // Registers are allocated per warp in units of 256, and a warp lives in one of the 4
    // register file partitions (16K registers each).
    const int warp_registers = (std::max(r.registers, 1) * 32 + 255) / 256 * 256;
    const int blocks_by_registers = 4 * (16384 / warp_registers) / warps;
    const int blocks_by_shared = (228 * 1024) / (r.shared_bytes + 1024);
    const int blocks = std::min({blocks_by_registers, blocks_by_shared, 64 / warps, 32});
    std::string per_element = "—", fp64 = "—", share = "compute-bound";
    if (k.spec.per_element != PerElement::kNone) {
      per_element = absl::StrFormat("%.1f", k.cost.instructions);
      fp64 = absl::StrFormat("%.1f", k.cost.fp64);
      // Elements per second the issue rate allows against what HBM delivers.
      const double issue_limit = kIssueRate / (k.cost.instructions + k.cost.fp64);
      const double memory_limit = kBandwidth / (k.spec.streams * dtype_size(k.spec.dtype));
      share = absl::StrFormat("%.0f%%", 100 * std::min(1.0, issue_limit / memory_limit));
    }
    std::printf("| %s | %d | %d | %d | %.0f%% | %s | %s | %s |\n", k.code.label.c_str(),
                r.registers, r.shared_bytes, blocks, 100.0 * blocks * warps / 64,
                per_element.c_str(), fp64.c_str(), share.c_str());
  }
}

}  // namespace
}  // namespace kiln
