#include "runtime/cuda/cuda_renderer.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/cuda_preamble.h"
#include "runtime/cuda/kernel_args.h"

namespace kiln::runtime::cuda {
namespace {

using jit::AnchorKind;
using jit::Instr;
using jit::InstrKind;
using jit::KernelProgram;
using ops::OpKind;

// The register type a dtype computes in (as on the CPU: f16/bf16/f32 in float, f64 in
// double, integers and bool in 64-bit integers).
std::string reg(DType dt) {
  if (dt == DType::F64) return "double";
  return is_floating(dt) ? "float" : "i64";
}

std::string storage(DType dt) {
  switch (dt) {
    case DType::Bool:
      return "unsigned char";
    case DType::I32:
      return "int";
    case DType::I64:
      return "i64";
    case DType::F16:
    case DType::BF16:
      return "unsigned short";
    case DType::F32:
      return "float";
    case DType::F64:
      return "double";
  }
  return "?";
}

// `v` (a register of dtype `from`) converted to dtype `to`, under the cast rules.
std::string cast(DType from, DType to, const std::string& v) {
  const bool from_float = is_floating(from);
  switch (to) {
    case DType::F16:
      return absl::StrCat("round_f16((float)(", v, "))");
    case DType::BF16:
      return absl::StrCat("round_bf16((float)(", v, "))");
    case DType::F32:
      return absl::StrCat("(float)(", v, ")");
    case DType::F64:
      return absl::StrCat("(double)(", v, ")");
    case DType::Bool:
      return from_float ? absl::StrCat("(i64)((", v, ") != 0 || (", v, ") != (", v, "))")
                        : absl::StrCat("(i64)((", v, ") != 0)");
    case DType::I32:
      return from_float ? absl::StrCat("sat_i32((double)(", v, "))")
                        : absl::StrCat("wrap_i32(", v, ")");
    case DType::I64:
      return from_float ? absl::StrCat("sat_i64((double)(", v, "))") : v;
  }
  return v;
}

// The value of a register after an op of dtype `dt`: as if stored (docs/fusion.md).
std::string settle(DType dt, const std::string& v) {
  switch (dt) {
    case DType::F16:
      return absl::StrCat("round_f16(", v, ")");
    case DType::BF16:
      return absl::StrCat("round_bf16(", v, ")");
    case DType::I32:
      return absl::StrCat("wrap_i32(", v, ")");
    case DType::Bool:
      return absl::StrCat("(i64)((", v, ") != 0)");
    default:
      return v;
  }
}

// The register value of a stored element (an lvalue or value of storage type).
std::string from_storage(DType dt, const std::string& element) {
  switch (dt) {
    case DType::F16:
      return absl::StrCat("f16_to_f32(", element, ")");
    case DType::BF16:
      return absl::StrCat("bf16_to_f32(", element, ")");
    case DType::Bool:
      return absl::StrCat("(i64)(", element, " != 0)");
    default:
      return absl::StrCat("(", reg(dt), ")", element);
  }
}

// Assigns register value `v` to a stored element.
std::string to_storage(DType dt, const std::string& element, const std::string& v) {
  switch (dt) {
    case DType::F16:
      return absl::StrCat(element, " = f32_to_f16(", v, ");");
    case DType::BF16:
      return absl::StrCat(element, " = f32_to_bf16(", v, ");");
    default:
      return absl::StrCat(element, " = (", storage(dt), ")(", v, ");");
  }
}

std::string load(DType dt, const std::string& ptr, const std::string& off) {
  return from_storage(dt, absl::StrCat("((const ", storage(dt), "*)", ptr, ")[", off, "]"));
}

std::string store(DType dt, const std::string& ptr, const std::string& off, const std::string& v) {
  return to_storage(dt, absl::StrCat("((", storage(dt), "*)", ptr, ")[", off, "]"), v);
}

std::string unary(OpKind op, DType dt, const std::string& x) {
  if (!is_floating(dt)) {
    switch (op) {
      case OpKind::Neg:
        return absl::StrCat("wsub(0, ", x, ")");
      case OpKind::Abs:
        return absl::StrCat("(", x, " < 0 ? wsub(0, ", x, ") : ", x, ")");
      case OpKind::Relu:
        return absl::StrCat("(", x, " > 0 ? ", x, " : (i64)0)");
      case OpKind::Square:
        return absl::StrCat("wmul(", x, ", ", x, ")");
      case OpKind::LogicalNot:
        return absl::StrCat("(i64)(", x, " == 0)");
      default:  // floor, ceil of integers
        return x;
    }
  }
  const bool f = dt != DType::F64;
  auto fn = [&](const char* name) { return absl::StrCat(name, f ? "f(" : "(", x, ")"); };
  const std::string one = f ? "1.0f" : "1.0";
  switch (op) {
    case OpKind::Neg:
      return absl::StrCat("(-", x, ")");
    case OpKind::Abs:
      return fn("fabs");
    case OpKind::Exp:
      return fn("exp");
    case OpKind::Log:
      return fn("log");
    case OpKind::Sqrt:
      return fn("sqrt");
    case OpKind::Rsqrt:
      return absl::StrCat("(", one, " / ", fn("sqrt"), ")");
    case OpKind::Sin:
      return fn("sin");
    case OpKind::Cos:
      return fn("cos");
    case OpKind::Tanh:
      return fn("tanh");
    case OpKind::Sigmoid:
      return absl::StrCat("(", one, " / (", one, " + ", f ? "expf(-" : "exp(-", x, ")))");
    case OpKind::Relu:
      return absl::StrCat("(", x, " > 0 ? ", x, " : (", x, " != ", x, " ? ", x, " : 0))");
    case OpKind::Gelu:
      return absl::StrCat("(0.5", f ? "f" : "", " * ", x, " * ", f ? "erfcf(-" : "erfc(-", x,
                          " * 0.70710678118654752440", f ? "f" : "", "))");
    case OpKind::Silu:
      return absl::StrCat("(", x, " / (", one, " + ", f ? "expf(-" : "exp(-", x, ")))");
    case OpKind::Erf:
      return fn("erf");
    case OpKind::Floor:
      return fn("floor");
    case OpKind::Ceil:
      return fn("ceil");
    case OpKind::Reciprocal:
      return absl::StrCat("(", one, " / ", x, ")");
    case OpKind::Square:
      return absl::StrCat("(", x, " * ", x, ")");
    default:
      return "0";
  }
}

std::string binary(OpKind op, DType operands, const std::string& a, const std::string& b) {
  const bool fl = is_floating(operands);
  switch (op) {
    case OpKind::Add:
      return fl ? absl::StrCat("(", a, " + ", b, ")") : absl::StrCat("wadd(", a, ", ", b, ")");
    case OpKind::Sub:
      return fl ? absl::StrCat("(", a, " - ", b, ")") : absl::StrCat("wsub(", a, ", ", b, ")");
    case OpKind::Mul:
      return fl ? absl::StrCat("(", a, " * ", b, ")") : absl::StrCat("wmul(", a, ", ", b, ")");
    case OpKind::Div:
      return absl::StrCat("(", a, " / ", b, ")");
    case OpKind::Pow:
      return fl ? absl::StrCat(operands == DType::F64 ? "pow(" : "powf(", a, ", ", b, ")")
                : absl::StrCat("ipow(", a, ", ", b, ")");
    case OpKind::Maximum:
      return absl::StrCat("nanmax(", a, ", ", b, ")");
    case OpKind::Minimum:
      return absl::StrCat("nanmin(", a, ", ", b, ")");
    case OpKind::Eq:
      return absl::StrCat("(i64)(", a, " == ", b, ")");
    case OpKind::Ne:
      return absl::StrCat("(i64)(", a, " != ", b, ")");
    case OpKind::Lt:
      return absl::StrCat("(i64)(", a, " < ", b, ")");
    case OpKind::Le:
      return absl::StrCat("(i64)(", a, " <= ", b, ")");
    case OpKind::Gt:
      return absl::StrCat("(i64)(", a, " > ", b, ")");
    case OpKind::Ge:
      return absl::StrCat("(i64)(", a, " >= ", b, ")");
    case OpKind::LogicalAnd:
      return absl::StrCat("(i64)(", a, " && ", b, ")");
    case OpKind::LogicalOr:
      return absl::StrCat("(i64)(", a, " || ", b, ")");
    default:
      return "0";
  }
}

class Renderer {
 public:
  // Index arrays have the Params struct's rank, so the two always agree.
  Renderer(const KernelProgram& p, IndexWidths widths)
      : p_(p), widths_(widths), layout_(params_layout(p)), rank_(layout_.rank) {}

  // The user's device functions this kernel calls, each once, after the preamble.
  void append_custom_functions(std::string& s) const {
    std::vector<int> done;
    for (const Instr& in : p_.instrs) {
      if (in.kind != InstrKind::kCustom) continue;
      if (std::find(done.begin(), done.end(), in.function) != done.end()) continue;
      done.push_back(in.function);
      const ops::CustomFunction* f = ops::custom_function(in.function);
      absl::StrAppend(&s, "// custom elementwise function '", f->name, "' (user source)\n",
                      f->cuda_source, "\n\n");
    }
  }

  // A user's whole kernel is its own source after the argument struct; Kiln adds nothing.
  std::string custom_kernel() const {
    const ops::CustomKernel* k = ops::custom_kernel(p_.anchor_attrs.function);
    return absl::StrCat("// custom kernel '", k->name, "' (user source)\n",
                        ops::kCustomKernelArgsSource, "\n", k->cuda_source, "\n");
  }

  std::string run() {
    if (p_.anchor == AnchorKind::kCustomKernel) return custom_kernel();
    std::string s = kPreamble;
    append_custom_functions(s);
    absl::StrAppend(&s, "// kernel ", p_.name, " (", anchor_name(p_.anchor), ")\n");
    const std::string printed = p_.to_string();
    for (absl::string_view line : absl::StrSplit(printed, '\n')) {
      if (!line.empty()) absl::StrAppend(&s, "//   ", line, "\n");
    }
    absl::StrAppend(&s, params_struct_source(layout_));
    absl::StrAppend(&s,
                    "template <class I>\n__device__ void body(const Params& a, const Split& split) "
                    "{\n  (void)split;\n");
    switch (p_.anchor) {
      case AnchorKind::kNone:
        pointwise(s);
        break;
      case AnchorKind::kReduce:
      case AnchorKind::kArgReduce:
        reduction(s);
        break;
      case AnchorKind::kRowNorm:
        row_norm(s);
        break;
      case AnchorKind::kMatmul:
        matmul(s);
        break;
      case AnchorKind::kConcat:
        concat(s);
        break;
      case AnchorKind::kCustomKernel:  // rendered by custom_kernel()
        break;
    }
    absl::StrAppend(&s, "}\n\n");
    for (const bool wide : {false, true}) {
      if (widths_ == (wide ? IndexWidths::k32 : IndexWidths::k64)) continue;
      absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", block_size(p_), ") ",
                      entry_name(p_, wide), "(const Params a, const Split split) { body<",
                      wide ? "long long" : "int", ">(a, split); }\n");
    }
    return s;
  }

 private:
  int rank(int space) const { return p_.space_ranks[space]; }

  // Declares `idx` as the multi-index of flat position `flat` in `space`.
  std::string unravel(int space, const std::string& idx, const std::string& flat) const {
    std::string s = absl::StrCat("I ", idx, "[", rank_, "] = {0};\n    { I rest = ", flat, ";");
    for (int d = rank(space) - 1; d >= 0; --d) {
      absl::StrAppend(&s, " ", idx, "[", d, "] = rest % (I)a.shape[", space, "][", d,
                      "]; rest /= (I)a.shape[", space, "][", d, "];");
    }
    return s + " }\n";
  }

  std::string numel(int space) const {
    std::vector<std::string> dims;
    dims.reserve(rank(space));
    for (int d = 0; d < rank(space); ++d) {
      dims.push_back(absl::StrCat("(I)a.shape[", space, "][", d, "]"));
    }
    return dims.empty() ? "(I)1" : absl::StrJoin(dims, " * ");
  }

  // Flat row-major index of multi-index `idx` in `space`.
  std::string flatten(int space, const std::string& idx) const {
    std::string s = "(I)0";
    for (int d = 0; d < rank(space); ++d) {
      s = absl::StrCat("(", s, " * (I)a.shape[", space, "][", d, "] + ", idx, "[", d, "])");
    }
    return s;
  }

  std::string offset(int view, int space, const std::string& idx) const {
    std::string s = absl::StrCat("((I)a.offset[", view, "]");
    for (int d = 0; d < rank(space); ++d) {
      absl::StrAppend(&s, " + ", idx, "[", d, "] * (I)a.stride[", view, "][", d, "]");
    }
    return s + ")";
  }

  // Declares v<k> for every instruction of `space`, indexed by `idx`.
  // With `lane` set (the vectorized pointwise path), load k reads element `lane` of the
  // thread's registers ld<k> instead of memory.
  std::string space_code(int space, const std::string& idx, const std::string& lane = "") const {
    std::string s;
    for (size_t k = 0; k < p_.instrs.size(); ++k) {
      const Instr& in = p_.instrs[k];
      if (in.space != space) continue;
      std::string v = absl::StrCat("v", k);
      std::string expr;
      auto operand = [&](int i) { return absl::StrCat("v", i); };
      switch (in.kind) {
        case InstrKind::kLoad:
          expr = lane.empty()
                     ? load(p_.input_dtypes[in.input], absl::StrCat("a.in[", in.input, "]"),
                            offset(in.view, space, idx))
                     : from_storage(p_.input_dtypes[in.input],
                                    absl::StrCat("ld", k, ".v[", lane, "]"));
          break;
        case InstrKind::kParam:
          expr = cast(DType::F64, in.dtype, absl::StrCat("a.p[", in.param, "]"));
          break;
        case InstrKind::kIndexLeaf: {
          const std::string off = offset(in.view, space, idx);
          if (in.op == OpKind::Arange) {
            expr = cast(DType::I64, in.dtype, absl::StrCat("(i64)", off));
          } else {
            const std::string seed = absl::StrCat("(u64)__double_as_longlong(a.p[", in.param, "])");
            const int bits = in.dtype == DType::F16 ? 11 : (in.dtype == DType::BF16 ? 8 : 24);
            expr = cast(DType::F64, in.dtype,
                        in.op == OpKind::Rand
                            ? absl::StrCat("rand_uniform((u64)", off, ", ", seed, ", ", bits, ")")
                            : absl::StrCat("rand_normal((u64)", off, ", ", seed, ")"));
          }
          break;
        }
        case InstrKind::kUnary:
          expr = settle(in.dtype, unary(in.op, p_.instrs[in.a].dtype, operand(in.a)));
          break;
        case InstrKind::kBinary: {
          const DType operands = p_.instrs[in.a].dtype;
          expr = binary(in.op, operands, operand(in.a), operand(in.b));
          if (!ops::is_comparison(in.op)) expr = settle(in.dtype, expr);
          break;
        }
        case InstrKind::kWhere:
          expr = absl::StrCat("(", operand(in.a), " ? ", operand(in.b), " : ", operand(in.c), ")");
          break;
        case InstrKind::kCast:
          expr = cast(p_.instrs[in.a].dtype, in.dtype, operand(in.a));
          break;
        case InstrKind::kAnchor:
          expr = "anchor_value";
          break;
        case InstrKind::kCustom: {
          std::vector<std::string> args;
          for (int o : {in.a, in.b, in.c}) {
            if (o >= 0) args.push_back(operand(o));
          }
          expr = absl::StrCat(ops::custom_function(in.function)->name, "(",
                              absl::StrJoin(args, ", "), ")");
          break;
        }
      }
      absl::StrAppend(&s, "      const ", reg(in.dtype), " ", v, " = ", expr, ";\n");
    }
    return s;
  }

  std::string stores(const std::string& flat) const {
    std::string s;
    for (const jit::Store& st : p_.stores) {
      absl::StrAppend(
          &s, "      ",
          store(p_.output_dtypes[st.output], absl::StrCat("a.out[", st.output, "]"), flat,
                cast(p_.instrs[st.value].dtype, p_.output_dtypes[st.output],
                     absl::StrCat("v", st.value))),
          "\n");
    }
    return s;
  }

  // Elements per thread of the 16-byte path: E = 16 / the widest element loaded or stored.
  // 0 (no vector path) when an index leaf needs every element's own multi-index, or a load
  // goes through a general strided view (a transpose or slice, rarely vectorizable: its
  // vector path would only double the kernel's size and compile time).
  int vector_width() const {
    int widest = 1;
    for (const Instr& in : p_.instrs) {
      if (in.kind == InstrKind::kIndexLeaf) return 0;
      if (in.kind == InstrKind::kLoad && absl::EndsWith(p_.view_patterns[in.view], ":strided")) {
        return 0;
      }
      if (in.kind == InstrKind::kLoad)
        widest = std::max(widest, dtype_size(p_.input_dtypes[in.input]));
    }
    for (DType dt : p_.output_dtypes) widest = std::max(widest, dtype_size(dt));
    return 16 / widest;
  }

  // A load whose view is not the output's own layout (a broadcast bias row or column): it
  // reads through its strides from the group's first multi-index.
  bool indirect(const Instr& in) const {
    return in.kind == InstrKind::kLoad && !absl::EndsWith(p_.view_patterns[in.view], ":contiguous");
  }

  // One thread per element of space 0, in a grid-stride loop.
  std::string scalar_pointwise_loop(const std::string& first) const {
    return absl::StrCat("  for (I i = ", first,
                        " + (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += "
                        "(I)gridDim.x * (I)blockDim.x) {\n    ",
                        unravel(0, "idx0", "i"), space_code(0, "idx0"), stores("i"), "  }\n");
  }

  // E consecutive outputs per thread, every load and store one aligned vector (Pack):
  //  - a contiguous load reads vector g of its input;
  //  - a broadcast load reads E consecutive elements at the group's first offset (its last
  //    stride is 1, a bias row) or one element for all E (its last stride is 0, a column).
  // That needs 16-byte aligned pointers, groups that stay in one row (E divides the last
  // dimension) and, for indirect loads with last stride 1, offsets and strides that are
  // multiples of E. Otherwise (checked once per launch) every element takes the scalar loop,
  // which also finishes the tail.
  std::string vector_pointwise(int e) const {
    const int last = rank(0) - 1;
    std::vector<std::string> pointers, conditions;
    for (size_t i = 0; i < p_.input_dtypes.size(); ++i)
      pointers.push_back(absl::StrCat("(u64)a.in[", i, "]"));
    for (size_t o = 0; o < p_.output_dtypes.size(); ++o)
      pointers.push_back(absl::StrCat("(u64)a.out[", o, "]"));
    conditions.push_back(absl::StrCat("((", absl::StrJoin(pointers, " | "), ") & 15) == 0"));
    bool any_indirect = false;
    for (const Instr& in : p_.instrs) {
      if (!indirect(in)) continue;
      any_indirect = true;
      std::string dense = absl::StrCat("(a.stride[", in.view, "][", last, "] == 1 && a.offset[",
                                       in.view, "] % ", e, " == 0");
      for (int d = 0; d < last; ++d) {
        absl::StrAppend(&dense, " && a.stride[", in.view, "][", d, "] % ", e, " == 0");
      }
      conditions.push_back(
          absl::StrCat("(a.stride[", in.view, "][", last, "] == 0 || ", dense, "))"));
    }
    if (any_indirect) conditions.push_back(absl::StrCat("a.shape[0][", last, "] % ", e, " == 0"));
    std::string s =
        absl::StrCat("  const bool vectorizable = ", absl::StrJoin(conditions, " &&\n      "),
                     ";\n", "  const I vectors = vectorizable ? total / ", e, " : (I)0;\n",
                     "  for (I g = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; g < "
                     "vectors; g += (I)gridDim.x * (I)blockDim.x) {\n");
    if (any_indirect) absl::StrAppend(&s, "    ", unravel(0, "idx0", absl::StrCat("g * ", e)));
    for (size_t k = 0; k < p_.instrs.size(); ++k) {
      const Instr& in = p_.instrs[k];
      if (in.kind != InstrKind::kLoad) continue;
      const std::string pack =
          absl::StrCat("Pack<", storage(p_.input_dtypes[in.input]), ", ", e, ">");
      const std::string ptr =
          absl::StrCat("((const ", storage(p_.input_dtypes[in.input]), "*)a.in[", in.input, "])");
      if (!indirect(in)) {
        absl::StrAppend(&s, "    const ", pack, " ld", k, " = ((const ", pack, "*)a.in[", in.input,
                        "])[g];\n");
        continue;
      }
      absl::StrAppend(&s, "    ", pack, " ld", k,
                      ";\n    {\n      const I at = ", offset(in.view, 0, "idx0"),
                      ";\n      if (a.stride[", in.view, "][", last,
                      "] == 0) {\n        #pragma unroll\n        for (int e = 0; e < ", e,
                      "; ++e) ld", k, ".v[e] = ", ptr, "[at];\n      } else {\n        ld", k,
                      " = *(const ", pack, "*)(", ptr, " + at);\n      }\n    }\n");
    }
    for (size_t o = 0; o < p_.output_dtypes.size(); ++o) {
      absl::StrAppend(&s, "    Pack<", storage(p_.output_dtypes[o]), ", ", e, "> out", o, ";\n");
    }
    absl::StrAppend(&s, "    #pragma unroll\n    for (int e = 0; e < ", e, "; ++e) {\n",
                    space_code(0, "", "e"));
    for (const jit::Store& st : p_.stores) {
      absl::StrAppend(
          &s, "      ",
          to_storage(p_.output_dtypes[st.output], absl::StrCat("out", st.output, ".v[e]"),
                     cast(p_.instrs[st.value].dtype, p_.output_dtypes[st.output],
                          absl::StrCat("v", st.value))),
          "\n");
    }
    absl::StrAppend(&s, "    }\n");
    for (size_t o = 0; o < p_.output_dtypes.size(); ++o) {
      absl::StrAppend(&s, "    ((Pack<", storage(p_.output_dtypes[o]), ", ", e, ">*)a.out[", o,
                      "])[g] = out", o, ";\n");
    }
    absl::StrAppend(
        &s, "  }\n  // The tail (and everything, when not vectorizable), one element per thread.\n",
        scalar_pointwise_loop(absl::StrCat("vectors * ", e)));
    return s;
  }

  void pointwise(std::string& s) const {
    absl::StrAppend(&s, "  const I total = ", numel(0), ";\n");
    // A rank-0 output is one element: nothing to vectorize.
    const int e = rank(0) > 0 ? vector_width() : 0;
    absl::StrAppend(&s, e > 1 ? vector_pointwise(e) : scalar_pointwise_loop("(I)0"));
  }

  // The epilogue for one element of space 0 whose anchor value is `value`.
  std::string epilogue(const std::string& value, const std::string& flat) const {
    return absl::StrCat("      const ", reg(p_.anchor_dtype),
                        " anchor_value = ", settle(p_.anchor_dtype, value), ";\n      ",
                        unravel(0, "idx0", flat), space_code(0, "idx0"), stores(flat));
  }

  // Declares nothing: sets idx1[d] for `dims` (innermost last) from the flat index `flat`.
  std::string unravel_dims(const std::vector<int>& dims, const std::string& flat) const {
    std::string s = absl::StrCat("{ I rest = ", flat, ";");
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
      absl::StrAppend(&s, " idx1[", *it, "] = rest % (I)a.shape[1][", *it,
                      "]; rest /= (I)a.shape[1][", *it, "];");
    }
    return s + " }";
  }

  // Reductions and arg-reductions, in one of two layouts (reduction_is_outer):
  //  - inner (the last axis is reduced): a warp per output (8 per block), its lanes striding
  //    along the reduced extent (consecutive lanes read consecutive elements), then warp
  //    shuffles combine them: short rows waste no threads and no block barrier is needed;
  //  - outer (the last axis is kept): a block per 32 consecutive outputs, lane l of each of
  //    the 8 warps on output l, warp w on reduced positions w, w+8, ...: every warp load is
  //    32 consecutive elements; shared memory combines the 8 warps.
  // Both can split the reduced extent over gridDim.y chunks (split.phase 1 writes each
  // chunk's partial result to split.scratch, phase 2 combines them in chunk order and runs
  // the epilogue), so a few outputs over a long extent still fill the GPU, and the result
  // does not depend on scheduling.
  void reduction(std::string& s) const {
    const bool arg = p_.anchor == AnchorKind::kArgReduce;
    std::vector<int> reduced, kept;
    for (int d = 0; d < rank(1); ++d) {
      const bool is_reduced =
          arg ? d == p_.anchor_attrs.axis
              : std::find(p_.anchor_attrs.axes.begin(), p_.anchor_attrs.axes.end(), d) !=
                    p_.anchor_attrs.axes.end();
      (is_reduced ? reduced : kept).push_back(d);
    }
    const DType operand = p_.instrs[p_.anchor_operands[0]].dtype;
    const bool floating = is_floating(operand);
    const std::string acc = floating ? "double" : "i64";
    const OpKind op = p_.anchor_op;
    const bool sum = op == OpKind::Sum || op == OpKind::Mean;
    std::string identity = "0";
    if (op == OpKind::Max || op == OpKind::Argmax) {
      identity = floating ? "-1.0 / 0.0" : "(i64)(-9223372036854775807LL - 1)";
    } else if (op == OpKind::Min || op == OpKind::Argmin) {
      identity = floating ? "1.0 / 0.0" : "9223372036854775807LL";
    }
    // Folds (y, yi) into (b, bi). Sums add. Otherwise a NaN wins (the first one), then the
    // extreme, and ties keep the lower index, so any combination order gives one answer.
    const std::string better = op == OpKind::Max || op == OpKind::Argmax ? ">" : "<";
    const std::string fold =
        sum ? absl::StrCat("b = ", floating ? "b + y" : "wadd(b, y)", ";")
            : absl::StrCat("if (", floating ? "(y != y && (!(b != b) || yi < bi)) || " : "",
                           "(!(b != b) && (y ", better,
                           " b || (y == b && yi < bi)))) { b = y; bi = yi; }");
    auto fold_into = [&](const std::string& b, const std::string& bi, const std::string& y,
                         const std::string& yi) {
      return absl::StrCat("{ ", acc, "& b = ", b, "; i64& bi = ", bi, "; const ", acc, " y = ", y,
                          "; const i64 yi = ", yi, "; (void)bi; (void)yi; ", fold, " }");
    };
    std::string extent = "(I)1";
    for (int d : reduced) extent = absl::StrCat(extent, " * (I)a.shape[1][", d, "]");
    const std::string value =
        arg ? "best_index" : (op == OpKind::Mean ? "best / (double)extent" : "best");
    // The partial results of chunk c for output o live at scratch[c * outputs + o].
    const std::string partial_values = absl::StrCat("((", acc, "*)split.scratch)");
    const std::string partial_indices = "((i64*)split.scratch + split.chunks * outputs)";
    // Stores a block's result for output o: the partial, or (unsplit) the epilogue.
    const std::string finish_output =
        absl::StrCat("      if (split.phase == 1) {\n        ", partial_values,
                     "[blockIdx.y * outputs + o] = best;\n        ", partial_indices,
                     "[blockIdx.y * outputs + o] = best_index;\n      } else {\n",
                     epilogue(value, "o"), "      }\n");
    absl::StrAppend(&s, "  const I outputs = ", numel(0), ";\n  const I extent = ", extent, ";\n");
    // Phase 2: a thread per output folds the chunks' partials in order.
    absl::StrAppend(
        &s, "  if (split.phase == 2) {\n",
        "    for (I o = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; o < outputs; o += "
        "(I)gridDim.x * "
        "(I)blockDim.x) {\n",
        "      ", acc, " best = ", identity, ";\n      i64 best_index = 9223372036854775807LL;\n",
        "      for (I c = 0; c < (I)split.chunks; ++c) ",
        fold_into("best", "best_index", absl::StrCat(partial_values, "[c * outputs + o]"),
                  absl::StrCat(partial_indices, "[c * outputs + o]")),
        "\n", epilogue(value, "o"), "    }\n    return;\n  }\n");
    // This block's chunk of the reduced extent (all of it unless split).
    absl::StrAppend(
        &s, "  const I chunks = split.phase == 1 ? (I)split.chunks : (I)1;\n",
        "  const I chunk_length = (extent + chunks - 1) / chunks;\n",
        "  const I begin = (split.phase == 1 ? (I)blockIdx.y : (I)0) * chunk_length;\n",
        "  const I end = begin + chunk_length < extent ? begin + chunk_length : extent;\n");
    const std::string load_x = absl::StrCat(
        "        ", unravel_dims(reduced, "r"), "\n", space_code(1, "idx1"), "        const ", acc,
        " x = (", acc, ")v", p_.anchor_operands[0], ";\n        ",
        fold_into("best", "best_index", "x",
                  absl::StrCat("(i64)idx1[", arg ? p_.anchor_attrs.axis : 0, "]")),
        "\n");
    if (reduction_is_outer(p_)) {
      absl::StrAppend(
          &s, "  __shared__ ", acc,
          " shared_value[8][32];\n  __shared__ i64 shared_index[8][32];\n",
          "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n",
          "  for (I tile = blockIdx.x; tile * 32 < outputs; tile += gridDim.x) {\n",
          "    const I o = tile * 32 + lane;\n    ", acc, " best = ", identity,
          ";\n    i64 best_index = 9223372036854775807LL;\n    if (o < outputs) {\n",
          "      I idx1[", rank_, "] = {0};\n      ", unravel_dims(kept, "o"), "\n",
          "      for (I r = begin + warp; r < end; r += 8) {\n", load_x, "      }\n    }\n",
          "    shared_value[warp][lane] = best;\n    shared_index[warp][lane] = best_index;\n",
          "    __syncthreads();\n    if (warp == 0 && o < outputs) {\n",
          "      for (int w = 1; w < 8; ++w) ",
          fold_into("best", "best_index", "shared_value[w][lane]", "shared_index[w][lane]"), "\n",
          finish_output, "    }\n    __syncthreads();\n  }\n");
      return;
    }
    // Inner: warp w of block b on outputs 8b + w, 8(b + gridDim.x) + w, ...; its lanes stride
    // along the reduced extent, then fold through shuffles (no block barrier).
    absl::StrAppend(
        &s, "  const int lane = threadIdx.x & 31;\n",
        "  for (I o = (I)blockIdx.x * 8 + (threadIdx.x >> 5); o < outputs; o += (I)gridDim.x * 8) "
        "{\n",
        "    I idx1[", rank_, "] = {0};\n    ", unravel_dims(kept, "o"), "\n    ", acc,
        " best = ", identity, ";\n    i64 best_index = 9223372036854775807LL;\n",
        "    for (I r = begin + lane; r < end; r += 32) {\n", load_x, "    }\n",
        "    for (int step = 16; step > 0; step >>= 1) {\n      const ", acc,
        " other = __shfl_down_sync(0xffffffffu, best, step);\n",
        "      const i64 other_index = __shfl_down_sync(0xffffffffu, best_index, step);\n      ",
        fold_into("best", "best_index", "other", "other_index"), "\n    }\n",
        "    if (lane == 0) {\n", finish_output, "    }\n  }\n");
  }

  // One block per row along the anchor axis. When the launch gives the block enough dynamic
  // shared memory for the row, pass 1 keeps the row's values (after the prologue) there and
  // passes 2 and 3 read them back: the row crosses global memory once. Otherwise every pass
  // recomputes the row from global memory. Each thread touches the same positions k in every
  // pass, so the cache needs no barrier of its own.
  void row_norm(std::string& s) const {
    const int axis = p_.anchor_attrs.axis;
    const OpKind op = p_.anchor_op;
    const std::string t = reg(p_.anchor_dtype);
    const int operand = p_.anchor_operands[0];
    const std::string cached = reg(p_.instrs[operand].dtype);
    std::vector<int> row_dims;  // every dim but the axis: which row
    for (int d = 0; d < rank(1); ++d) {
      if (d != axis) row_dims.push_back(d);
    }
    absl::StrAppend(
        &s, "  __shared__ double shared[32];\n  const I extent = (I)a.shape[1][", axis,
        "];\n  const I rows = (", numel(1), ") / (extent > 0 ? extent : (I)1);\n",
        "  const double eps = ",
        p_.anchor_param >= 0 ? absl::StrCat("a.p[", p_.anchor_param, "]") : "0.0", ";\n  ", cached,
        "* const row_cache = dynamic_shared<", cached, ">();\n",
        "  const bool persistent = (u64)dynamic_shared_bytes() >= (u64)extent * sizeof(", cached,
        ");\n", "  for (I row = blockIdx.x; row < rows; row += gridDim.x) {\n", "    I idx1[",
        rank_, "] = {0};\n    ", unravel_dims(row_dims, "row"), "\n");
    // Pass 1's value at k: from global memory through the prologue, kept in the cache.
    auto x_from_memory = [&](const std::string& k) {
      return absl::StrCat("      idx1[", axis, "] = ", k, ";\n", space_code(1, "idx1"),
                          "      if (persistent) row_cache[", k, "] = v", operand, ";\n",
                          "      const double x = (double)v", operand, ";\n");
    };
    // ... or, in later passes, from the cache when there is one.
    auto x_again = [&](const std::string& k) {
      return absl::StrCat("      idx1[", axis, "] = ", k, ";\n      double x;\n",
                          "      if (persistent) {\n        x = (double)row_cache[", k, "];\n",
                          "      } else {\n", space_code(1, "idx1"), "        x = (double)v",
                          operand, ";\n      }\n");
    };
    const bool softmax = op == OpKind::Softmax || op == OpKind::LogSoftmax;
    // Pass 1: the row's max (softmax) or mean (layer_norm); pass 2: sum of exp or squares.
    absl::StrAppend(
        &s, "    double first = ", softmax ? "-1.0 / 0.0" : "0.0", ";\n",
        "    for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n", x_from_memory("k"),
        softmax ? "      first = x > first ? x : first;\n" : "      first += x;\n", "    }\n",
        "    first = block_reduce<double>(first, [](double p, double q) { return ",
        softmax ? "p > q ? p : q" : "p + q", "; }, ", softmax ? "-1.0 / 0.0" : "0.0",
        ", shared);\n");
    if (softmax)
      absl::StrAppend(&s, "    if (first == 1.0 / 0.0 || first == -1.0 / 0.0) first = 0.0;\n");
    if (op == OpKind::LayerNorm) absl::StrAppend(&s, "    first /= (double)extent;\n");
    if (op == OpKind::RmsNorm) absl::StrAppend(&s, "    first = 0.0;\n");
    absl::StrAppend(
        &s,
        "    double second = 0.0;\n    for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n",
        x_again("k"),
        softmax ? "      second += exp(x - first);\n"
                : "      second += (x - first) * (x - first);\n",
        "    }\n    second = block_reduce<double>(second, [](double p, double q) { return p + q; "
        "}, 0.0, shared);\n",
        "    for (I k = threadIdx.x; k < extent; k += blockDim.x) {\n", x_again("k"));
    std::string y;
    if (op == OpKind::Softmax) y = "exp(x - first) / second";
    if (op == OpKind::LogSoftmax) y = "x - first - log(second)";
    if (op == OpKind::LayerNorm || op == OpKind::RmsNorm) {
      absl::StrAppend(&s, "      I idx2[", rank_, "] = {0}; idx2[0] = k;\n", space_code(2, "idx2"));
      if (op == OpKind::LayerNorm)
        absl::StrAppend(&s, "      I idx3[", rank_, "] = {0}; idx3[0] = k;\n",
                        space_code(3, "idx3"));
      y = absl::StrCat("(x - first) / sqrt(second / (double)extent + eps) * (double)v",
                       p_.anchor_operands[1]);
      if (op == OpKind::LayerNorm) absl::StrAppend(&y, " + (double)v", p_.anchor_operands[2]);
    }
    absl::StrAppend(&s, "      const I flat = ", flatten(1, "idx1"), ";\n",
                    epilogue(absl::StrCat("(", t, ")(", y, ")"), "flat"), "    }\n  }\n");
  }

  // Sets idx<space>'s batch dims from the output multi-index `out` (broadcast dims read 0).
  std::string batch_indices(int space, int batch) const {
    std::string s;
    const int r = rank(space);
    for (int j = 0; j < r - 2; ++j) {
      absl::StrAppend(&s, "    idx", space, "[", j, "] = a.shape[", space, "][", j,
                      "] == 1 ? 0 : out[", batch - (r - 2) + j, "];\n");
    }
    return s;
  }

  // Tiled matmuls: a block computes a 64x64 output tile. Each k-step of 16 stages a 64x16
  // slice of A and a 16x64 slice of B in shared memory (every element computed through its
  // prologue, zero past the edges), then:
  //  - f16/bf16 (tensor cores): each of the 8 warps (4 down, 2 across) multiplies its 16x32
  //    part with four mma.sync m16n8k16 (f32 accumulators), fragments laid out as PTX's
  //    "Matrix Fragments for mma.m16n8k16 with floating point type";
  //  - f32 (CUDA cores, full f32: no silent TF32): each thread accumulates a 4x4 block of
  //    the tile, in k order as the one-thread-per-output kernel did.
  // The epilogue runs on each accumulator element.
  void tiled_matmul(std::string& s) const {
    const int ra = rank(1), rb = rank(2), r0 = rank(0);
    const int batch = r0 - 2;
    const bool tensor_cores = matmul_uses_tensor_cores(p_);
    const bool bf16 = p_.instrs[p_.anchor_operands[0]].dtype == DType::BF16;
    const std::string staged = tensor_cores ? "unsigned short" : "float";
    const std::string to_staged = tensor_cores ? (bf16 ? "f32_to_bf16" : "f32_to_f16") : "";
    const std::string t = reg(p_.anchor_dtype);
    auto stage = [&](int space, int operand, const std::string& first, const std::string& second,
                     const std::string& bounds, const std::string& target) {
      return absl::StrCat("        if (", bounds, ") {\n          idx", space, "[", rank(space) - 2,
                          "] = ", first, ";\n          idx", space, "[", rank(space) - 1,
                          "] = ", second, ";\n", space_code(space, absl::StrCat("idx", space)),
                          "          value = v", operand, ";\n        }\n        ", target, " = ",
                          to_staged, "(value);\n");
    };
    absl::StrAppend(
        &s, "  const I M = (I)a.shape[1][", ra - 2, "], N = (I)a.shape[2][", rb - 1,
        "], depth = (I)a.shape[1][", ra - 1, "];\n",
        "  const I tiles_m = (M + 63) / 64, tiles_n = (N + 63) / 64;\n",
        "  const I tiles = M * N > 0 ? (", numel(0), ") / (M * N) * tiles_m * tiles_n : (I)0;\n",
        "  __shared__ ", staged, " tile_a[64][16 + 8];  // padded against bank conflicts\n",
        "  __shared__ ", staged, " tile_b[16][64 + 8];\n",
        "  __shared__ float tile_out[64][64 + 1];\n",
        "  for (I tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n",
        "    const I b = tile / (tiles_m * tiles_n), rest = tile % (tiles_m * tiles_n);\n",
        "    const I m0 = rest / tiles_n * 64, n0 = rest % tiles_n * 64;\n    ",
        unravel(0, "out", "b * M * N"), "    I idx1[", rank_, "] = {0};\n    I idx2[", rank_,
        "] = {0};\n", batch_indices(1, batch), batch_indices(2, batch),
        "    float acc[4][4] = {{0}};\n", "    for (I k0 = 0; k0 < depth; k0 += 16) {\n",
        "      for (int e = threadIdx.x; e < 64 * 16; e += blockDim.x) {\n",
        "        const int row = e >> 4, kk = e & 15;\n",
        "        const I m = m0 + row, k = k0 + kk;\n        float value = 0.0f;\n",
        stage(1, p_.anchor_operands[0], "m", "k", "m < M && k < depth", "tile_a[row][kk]"),
        "      }\n      for (int e = threadIdx.x; e < 16 * 64; e += blockDim.x) {\n",
        "        const int kk = e >> 6, col = e & 63;\n",
        "        const I k = k0 + kk, n = n0 + col;\n        float value = 0.0f;\n",
        stage(2, p_.anchor_operands[1], "k", "n", "k < depth && n < N", "tile_b[kk][col]"),
        "      }\n      __syncthreads();\n");
    // Where in the 64x64 tile accumulator acc[x][y] of this thread belongs.
    std::string row, col;
    if (tensor_cores) {
      absl::StrAppend(
          &s, "      const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n",
          "      const int group = lane >> 2, thread_in_group = lane & 3;\n",
          "      const int warp_m = (warp & 3) * 16, warp_n = (warp >> 2) * 32;\n",
          "      // A fragment: a0,a1 (row g) a2,a3 (row g+8) at cols 2t,2t+1; a4..a7 the same at "
          "+8.\n",
          "      const int ar = warp_m + group, ac = thread_in_group * 2;\n",
          "      const unsigned fa[4] = {pack2(tile_a[ar][ac], tile_a[ar][ac + 1]),\n",
          "                              pack2(tile_a[ar + 8][ac], tile_a[ar + 8][ac + 1]),\n",
          "                              pack2(tile_a[ar][ac + 8], tile_a[ar][ac + 9]),\n",
          "                              pack2(tile_a[ar + 8][ac + 8], tile_a[ar + 8][ac + 9])};\n",
          "      #pragma unroll\n      for (int nt = 0; nt < 4; ++nt) {\n",
          "        // B fragment: b0,b1 at k = 2t,2t+1 and b2,b3 at k + 8, column g.\n",
          "        const int bc = warp_n + nt * 8 + group, bk = thread_in_group * 2;\n",
          "        const unsigned fb[2] = {pack2(tile_b[bk][bc], tile_b[bk + 1][bc]),\n",
          "                                pack2(tile_b[bk + 8][bc], tile_b[bk + 9][bc])};\n",
          "        ", bf16 ? "mma_bf16_16816" : "mma_f16_16816", "(acc[nt], fa, fb);\n      }\n");
      // Accumulator c_i of n-tile x: row g (i < 2) or g + 8, column 2t + (i & 1).
      row = "((threadIdx.x >> 5) & 3) * 16 + ((threadIdx.x & 31) >> 2) + (y >= 2 ? 8 : 0)";
      col = "(threadIdx.x >> 7) * 32 + x * 8 + (threadIdx.x & 3) * 2 + (y & 1)";
    } else {
      absl::StrAppend(
          &s, "      const int tr = (threadIdx.x >> 4) * 4, tc = (threadIdx.x & 15) * 4;\n",
          "      #pragma unroll\n      for (int kk = 0; kk < 16; ++kk) {\n",
          "        #pragma unroll\n        for (int x = 0; x < 4; ++x) {\n",
          "          #pragma unroll\n          for (int y = 0; y < 4; ++y) acc[x][y] += "
          "tile_a[tr + x][kk] * tile_b[kk][tc + y];\n        }\n      }\n");
      row = "(threadIdx.x >> 4) * 4 + x";
      col = "(threadIdx.x & 15) * 4 + y";
    }
    // The accumulators go through shared memory, so the epilogue is written once (not once
    // per unrolled accumulator: that multiplied compile time) and its stores coalesce.
    absl::StrAppend(&s, "      __syncthreads();\n    }\n",
                    "    #pragma unroll\n    for (int x = 0; x < 4; ++x) {\n",
                    "      #pragma unroll\n      for (int y = 0; y < 4; ++y) tile_out[", row, "][",
                    col, "] = acc[x][y];\n    }\n    __syncthreads();\n",
                    "    for (int e = threadIdx.x; e < 64 * 64; e += blockDim.x) {\n",
                    "      const I m = m0 + (e >> 6), n = n0 + (e & 63);\n",
                    "      if (m >= M || n >= N) continue;\n",
                    "      const I flat = (b * M + m) * N + n;\n",
                    epilogue(absl::StrCat("(", t, ")tile_out[e >> 6][e & 63]"), "flat"), "    }\n",
                    "    __syncthreads();\n  }\n");
  }

  // One thread per output element: a dot product over the shared dimension.
  void matmul(std::string& s) const {
    if (matmul_is_tiled(p_)) {
      tiled_matmul(s);
      return;
    }
    const int ra = rank(1), rb = rank(2), r0 = rank(0);
    const int batch = r0 - (ra > 1) - (rb > 1);
    const std::string t = reg(p_.anchor_dtype);
    absl::StrAppend(
        &s, "  const I total = ", numel(0), ";\n  const I depth = (I)a.shape[1][", ra - 1, "];\n",
        "  for (I i = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * "
        "(I)blockDim.x) {\n    ",
        unravel(0, "out", "i"), "    I idx1[", rank_, "] = {0};\n    I idx2[", rank_, "] = {0};\n");
    for (int j = 0; j < ra - 2; ++j) {  // batch dims of a, right-aligned to the output's
      const int o = batch - (ra - 2) + j;
      absl::StrAppend(&s, "    idx1[", j, "] = a.shape[1][", j, "] == 1 ? 0 : out[", o, "];\n");
    }
    for (int j = 0; j < rb - 2; ++j) {
      const int o = batch - (rb - 2) + j;
      absl::StrAppend(&s, "    idx2[", j, "] = a.shape[2][", j, "] == 1 ? 0 : out[", o, "];\n");
    }
    if (ra > 1) absl::StrAppend(&s, "    idx1[", ra - 2, "] = out[", batch, "];\n");
    if (rb > 1) absl::StrAppend(&s, "    idx2[", rb - 1, "] = out[", r0 - 1, "];\n");
    const std::string acc =
        is_floating(p_.anchor_dtype) ? (p_.anchor_dtype == DType::F64 ? "double" : "float") : "i64";
    absl::StrAppend(
        &s, "    ", acc, " sum = 0;\n    for (I k = 0; k < depth; ++k) {\n      idx1[", ra - 1,
        "] = k;\n      idx2[", rb > 1 ? rb - 2 : 0, "] = k;\n", space_code(1, "idx1"),
        space_code(2, "idx2"), "      sum = ",
        is_floating(p_.anchor_dtype)
            ? absl::StrCat("sum + v", p_.anchor_operands[0], " * v", p_.anchor_operands[1])
            : absl::StrCat("wadd(sum, wmul(v", p_.anchor_operands[0], ", v", p_.anchor_operands[1],
                           "))"),
        ";\n    }\n", epilogue(absl::StrCat("(", t, ")sum"), "i"), "  }\n");
  }

  // One thread per output element: the operand that covers its position along the axis.
  void concat(std::string& s) const {
    const int axis = p_.anchor_attrs.axis;
    const std::string t = reg(p_.anchor_dtype);
    absl::StrAppend(&s, "  const I total = ", numel(0), ";\n",
                    "  for (I i = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += "
                    "(I)gridDim.x * (I)blockDim.x) {\n    ",
                    unravel(0, "out", "i"), "    ", t, " value = 0;\n    I pos = out[", axis,
                    "];\n    bool found = false;\n");
    for (size_t k = 0; k < p_.anchor_operands.size(); ++k) {
      const int space = static_cast<int>(k) + 1;
      const std::string idx = absl::StrCat("idx", space);
      absl::StrAppend(&s, "    if (!found && pos < (I)a.shape[", space, "][", axis,
                      "]) {\n      I ", idx, "[", rank_, "];\n      for (int d = 0; d < ", rank_,
                      "; ++d) ", idx, "[d] = out[d];\n      ", idx, "[", axis, "] = pos;\n",
                      space_code(space, idx), "      value = (", t, ")v", p_.anchor_operands[k],
                      ";\n      found = true;\n    } else if (!found) {\n      pos -= (I)a.shape[",
                      space, "][", axis, "];\n    }\n");
    }
    absl::StrAppend(&s, epilogue("value", "i"), "  }\n");
  }

  const KernelProgram& p_;
  const IndexWidths widths_;
  const ParamsLayout layout_;
  const int rank_;
};

}  // namespace

bool matmul_uses_tensor_cores(const jit::KernelProgram& p) {
  if (p.anchor != AnchorKind::kMatmul || p.space_ranks[1] < 2 || p.space_ranks[2] < 2) return false;
  const DType a = p.instrs[p.anchor_operands[0]].dtype, b = p.instrs[p.anchor_operands[1]].dtype;
  return a == b && (a == DType::F16 || a == DType::BF16);
}

bool matmul_is_tiled(const jit::KernelProgram& p) {
  if (matmul_uses_tensor_cores(p)) return true;
  if (p.anchor != AnchorKind::kMatmul || p.space_ranks[1] < 2 || p.space_ranks[2] < 2) return false;
  return p.instrs[p.anchor_operands[0]].dtype == DType::F32 &&
         p.instrs[p.anchor_operands[1]].dtype == DType::F32;
}

bool reduction_is_outer(const jit::KernelProgram& p) {
  if (p.anchor != AnchorKind::kReduce && p.anchor != AnchorKind::kArgReduce) return false;
  const int last = p.space_ranks[1] - 1;
  if (last < 0) return false;
  if (p.anchor == AnchorKind::kArgReduce) return p.anchor_attrs.axis != last;
  const auto& axes = p.anchor_attrs.axes;
  return !axes.empty() && std::find(axes.begin(), axes.end(), last) == axes.end();
}

int block_size(const jit::KernelProgram& program) {
  (void)program;
  return 256;
}

std::string render_cuda(const jit::KernelProgram& program, IndexWidths widths) {
  return Renderer(program, widths).run();
}

std::string entry_name(const jit::KernelProgram& program, bool wide) {
  return program.name + (wide ? "_i64" : "_i32");
}

}  // namespace kiln::runtime::cuda
