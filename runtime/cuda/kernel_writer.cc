#include "runtime/cuda/kernel_writer.h"

#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/custom_functions.h"
#include "ops/scalar_math.h"

namespace kiln::runtime::cuda {

using jit::Instr;
using jit::InstrKind;
using ops::OpKind;

// The C type of the register class `dt` computes in (jit::register_class, as on the CPU).
std::string register_type(DType dt) {
  switch (jit::register_class(dt)) {
    case jit::RegisterClass::kFloat:
      return "float";
    case jit::RegisterClass::kDouble:
      return "double";
    case jit::RegisterClass::kInt:
      return "i64";
  }
  return "?";
}

// The C type an element of dtype `dt` is stored as in memory.
std::string storage_type(DType dt) {
  switch (dt) {
    case DType::Bool:
    case DType::U8:
    case DType::F8E4M3:
    case DType::F8E5M2:
      return "unsigned char";
    case DType::I8:
      return "signed char";
    case DType::I16:
      return "short";
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
    default:  // the block formats, which no kernel reads (ops/infer.cc)
      throw std::logic_error(std::string("internal error: a kernel stores ") + dtype_name(dt));
  }
}

// `v` (a register of dtype `from`) converted to dtype `to`, under the cast rules.
std::string cast(DType from, DType to, const std::string& v) {
  const bool from_float = is_floating(from);
  switch (to) {
    case DType::F8E4M3:
      return absl::StrCat("round_e4m3((float)(", v, "))");
    case DType::F8E5M2:
      return absl::StrCat("round_e5m2((float)(", v, "))");
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
    case DType::I8:
      return from_float ? absl::StrCat("sat_int(", v, ", -128, 127)")
                        : absl::StrCat("wrap_i8(", v, ")");
    case DType::U8:
      return from_float ? absl::StrCat("sat_int(", v, ", 0, 255)")
                        : absl::StrCat("wrap_u8(", v, ")");
    case DType::I16:
      return from_float ? absl::StrCat("sat_int(", v, ", -32768, 32767)")
                        : absl::StrCat("wrap_i16(", v, ")");
    case DType::I32:
      return from_float ? absl::StrCat("sat_i32((double)(", v, "))")
                        : absl::StrCat("wrap_i32(", v, ")");
    case DType::I64:
      return from_float ? absl::StrCat("sat_i64((double)(", v, "))") : v;
    default:  // the block formats, which no kernel reads (ops/infer.cc)
      throw std::logic_error(std::string("internal error: a kernel casts to ") + dtype_name(to));
  }
  return v;
}

// Assigns register value `v` (of dtype `dt`) to a stored element.
std::string to_storage(DType dt, const std::string& element, const std::string& v) {
  switch (dt) {
    case DType::F16:
      return absl::StrCat(element, " = f32_to_f16(", v, ");");
    case DType::BF16:
      return absl::StrCat(element, " = f32_to_bf16(", v, ");");
    case DType::F8E4M3:
      return absl::StrCat(element, " = f32_to_e4m3(", v, ");");
    case DType::F8E5M2:
      return absl::StrCat(element, " = f32_to_e5m2(", v, ");");
    default:
      return absl::StrCat(element, " = (", storage_type(dt), ")(", v, ");");
  }
}

namespace {

// The value of a register after an op of dtype `dt`: as if stored (docs/fusion.md): f16
// and bf16 round to 16 bits, the 8-bit floats to 8, integers narrower than i64 wrap and bool
// is 0 or 1, exactly as on the CPU.
std::string round_to_dtype(DType dt, const std::string& v) {
  switch (dt) {
    case DType::F16:
      return absl::StrCat("round_f16(", v, ")");
    case DType::BF16:
      return absl::StrCat("round_bf16(", v, ")");
    case DType::F8E4M3:
      return absl::StrCat("round_e4m3(", v, ")");
    case DType::F8E5M2:
      return absl::StrCat("round_e5m2(", v, ")");
    case DType::I8:
      return absl::StrCat("wrap_i8(", v, ")");
    case DType::U8:
      return absl::StrCat("wrap_u8(", v, ")");
    case DType::I16:
      return absl::StrCat("wrap_i16(", v, ")");
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
    case DType::F8E4M3:
      return absl::StrCat("e4m3_to_f32(", element, ")");
    case DType::F8E5M2:
      return absl::StrCat("e5m2_to_f32(", element, ")");
    case DType::Bool:
      return absl::StrCat("(i64)(", element, " != 0)");
    default:
      return absl::StrCat("(", register_type(dt), ")", element);
  }
}

// The register value of element `off` of the array of dtype `dt` at `ptr`.
std::string load(DType dt, const std::string& ptr, const std::string& off) {
  if (is_block_quantized(dt)) {  // an element of a quantized weight, decoded from its block
    return absl::StrCat("dequantize_", dtype_name(dt), "((const unsigned char*)", ptr, ", (i64)(",
                        off, "))");
  }
  return from_storage(dt, absl::StrCat("((const ", storage_type(dt), "*)", ptr, ")[", off, "]"));
}

// Stores register value `v` as element `off` of the array of dtype `dt` at `ptr`.
std::string store(DType dt, const std::string& ptr, const std::string& off, const std::string& v) {
  return to_storage(dt, absl::StrCat("((", storage_type(dt), "*)", ptr, ")[", off, "]"), v);
}

// The value of elementwise op `op` on registers `operands`, before rounding to its dtype: a
// call of the op's functor from ops/scalar_math.inc, which every module carries in its
// preamble (kiln::math::Exp{}(v3)); the register types (float, double, i64) pick the
// functor's floating or integer branch. Comparisons and logical ops give bool, held as i64.
std::string elementwise(OpKind op, const std::vector<std::string>& operands) {
  const std::string call = absl::StrCat("kiln::math::", ops::op_info(op).enum_name, "{}(",
                                        absl::StrJoin(operands, ", "), ")");
  return math::gives_bool(op) ? absl::StrCat("(i64)", call) : call;
}

}  // namespace

KernelWriter::KernelWriter(const jit::KernelProgram& program)
    : program_(program), layout_(params_layout(program)), rank_(layout_.rank) {}

std::string KernelWriter::unravel(int space, const std::string& idx,
                                  const std::string& flat) const {
  std::string s = absl::StrCat("I ", idx, "[", rank_, "] = {0};\n    { I rest = ", flat, ";");
  for (int d = rank(space) - 1; d >= 0; --d) {
    absl::StrAppend(&s, " ", idx, "[", d, "] = rest % (I)a.shape[", space, "][", d,
                    "]; rest /= (I)a.shape[", space, "][", d, "];");
  }
  return s + " }\n";
}

std::string KernelWriter::unravel_dims(const std::vector<int>& dims,
                                       const std::string& flat) const {
  std::string s = absl::StrCat("{ I rest = ", flat, ";");
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    absl::StrAppend(&s, " idx1[", *it, "] = rest % (I)a.shape[1][", *it,
                    "]; rest /= (I)a.shape[1][", *it, "];");
  }
  return s + " }";
}

std::string KernelWriter::numel(int space) const {
  std::vector<std::string> dims;
  dims.reserve(rank(space));
  for (int d = 0; d < rank(space); ++d) {
    dims.push_back(absl::StrCat("(I)a.shape[", space, "][", d, "]"));
  }
  return dims.empty() ? "(I)1" : absl::StrJoin(dims, " * ");
}

std::string KernelWriter::flatten(int space, const std::string& idx) const {
  std::string s = "(I)0";
  for (int d = 0; d < rank(space); ++d) {
    s = absl::StrCat("(", s, " * (I)a.shape[", space, "][", d, "] + ", idx, "[", d, "])");
  }
  return s;
}

std::string KernelWriter::offset(int view, int space, const std::string& idx) const {
  std::string s = absl::StrCat("((I)a.offset[", view, "]");
  for (int d = 0; d < rank(space); ++d) {
    absl::StrAppend(&s, " + ", idx, "[", d, "] * (I)a.stride[", view, "][", d, "]");
  }
  return s + ")";
}

std::string KernelWriter::space_code(int space, const std::string& idx,
                                     const std::string& lane) const {
  std::string s;
  for (size_t k = 0; k < program_.instrs.size(); ++k) {
    const Instr& in = program_.instrs[k];
    if (in.space != space) continue;
    std::string v = absl::StrCat("v", k);
    std::string expr;
    auto operand = [&](int i) { return absl::StrCat("v", i); };
    switch (in.kind) {
      case InstrKind::kLoad:
        expr = lane.empty()
                   ? load(program_.input_dtypes[in.input], absl::StrCat("a.in[", in.input, "]"),
                          offset(in.view, space, idx))
                   : from_storage(program_.input_dtypes[in.input],
                                  absl::StrCat("ld", k, ".v[", lane, "]"));
        break;
      case InstrKind::kGather: {
        // The position along the gathered axis, checked first: an out-of-range index is
        // reported to the host (which raises it after the launch) and reads nothing.
        const std::string index = operand(in.operands[0]);
        const std::string position = absl::StrCat("g", k);
        const std::string extent = absl::StrCat("(i64)a.gather[", in.view, "][0]");
        const char* rule =
            in.op == OpKind::DynamicSlice ? "slice_start_position" : "gather_position";
        absl::StrAppend(&s, "      const i64 ", position, " = kiln::math::", rule, "<i64>(", index,
                        ", ", extent, ");\n      if (", position,
                        " < 0) kiln_report_index_error(a.index_error, ", index, ", ", extent, ", ",
                        static_cast<int>(in.op), ");  // ", ops::op_name(in.op), "\n");
        expr =
            absl::StrCat("(", position, " < 0 ? (", register_type(in.dtype), ")0 : ",
                         load(program_.input_dtypes[in.input], absl::StrCat("a.in[", in.input, "]"),
                              absl::StrCat(offset(in.view, space, idx), " + (I)", position,
                                           " * (I)a.gather[", in.view, "][1]")),
                         ")");
        break;
      }
      case InstrKind::kParam:
        expr = cast(DType::F64, in.dtype, absl::StrCat("a.p[", in.param, "]"));
        break;
      case InstrKind::kIndexLeaf: {
        const std::string off = offset(in.view, space, idx);
        if (in.op == OpKind::Arange) {
          expr = cast(DType::I64, in.dtype, absl::StrCat("(i64)", off));
        } else {
          const std::string seed = absl::StrCat("(u64)__double_as_longlong(a.p[", in.param, "])");
          const int bits = math::uniform_bits(in.dtype);
          expr = cast(
              DType::F64, in.dtype,
              in.op == OpKind::Rand
                  ? absl::StrCat("kiln::math::rand_uniform((u64)", off, ", ", seed, ", ", bits, ")")
                  : absl::StrCat("kiln::math::rand_normal((u64)", off, ", ", seed, ")"));
        }
        break;
      }
      case InstrKind::kUnary:
        expr = round_to_dtype(in.dtype, elementwise(in.op, {operand(in.operands[0])}));
        break;
      case InstrKind::kBinary: {
        expr = elementwise(in.op, {operand(in.operands[0]), operand(in.operands[1])});
        if (!ops::is_comparison(in.op)) expr = round_to_dtype(in.dtype, expr);
        break;
      }
      case InstrKind::kWhere:
        expr = absl::StrCat("(", operand(in.operands[0]), " ? ", operand(in.operands[1]), " : ",
                            operand(in.operands[2]), ")");
        break;
      case InstrKind::kCast:
        expr = cast(program_.instrs[in.operands[0]].dtype, in.dtype, operand(in.operands[0]));
        break;
      case InstrKind::kAnchor:
        expr = "anchor_value";
        break;
      case InstrKind::kCustom: {
        std::vector<std::string> args;
        for (int o : in.operands) {
          if (o >= 0) args.push_back(operand(o));
        }
        expr = absl::StrCat(ops::custom_function(in.function)->name, "(", absl::StrJoin(args, ", "),
                            ")");
        break;
      }
    }
    absl::StrAppend(&s, "      const ", register_type(in.dtype), " ", v, " = ", expr, ";\n");
  }
  return s;
}

std::string KernelWriter::vector_loads(int space, int e, const std::string& idx,
                                       const std::string& indent) const {
  std::string s;
  for (size_t k = 0; k < program_.instrs.size(); ++k) {
    const Instr& in = program_.instrs[k];
    if (in.space != space || in.kind != InstrKind::kLoad) continue;
    const std::string element = storage_type(program_.input_dtypes[in.input]);
    const std::string pack = absl::StrCat("Pack<", element, ", ", e, ">");
    absl::StrAppend(&s, indent, "const ", pack, " ld", k, " = *(const ", pack, "*)((const ",
                    element, "*)a.in[", in.input, "] + ", offset(in.view, space, idx), ");\n");
  }
  return s;
}

std::string KernelWriter::stores(const std::string& flat) const {
  std::string s;
  for (const jit::Store& st : program_.stores) {
    absl::StrAppend(
        &s, "      ",
        store(program_.output_dtypes[st.output], absl::StrCat("a.out[", st.output, "]"), flat,
              cast(program_.instrs[st.value].dtype, program_.output_dtypes[st.output],
                   absl::StrCat("v", st.value))),
        "\n");
  }
  return s;
}

std::string KernelWriter::vector_stores(int e, const std::string& lane_code, const std::string& at,
                                        PackOffset unit, const std::string& indent) const {
  std::string s;
  for (size_t o = 0; o < program_.output_dtypes.size(); ++o) {
    absl::StrAppend(&s, indent, "Pack<", storage_type(program_.output_dtypes[o]), ", ", e, "> out",
                    o, ";\n");
  }
  absl::StrAppend(&s, indent, "#pragma unroll\n", indent, "for (int e = 0; e < ", e, "; ++e) {\n",
                  lane_code);
  for (const jit::Store& st : program_.stores) {
    absl::StrAppend(
        &s, "      ",
        to_storage(program_.output_dtypes[st.output], absl::StrCat("out", st.output, ".v[e]"),
                   cast(program_.instrs[st.value].dtype, program_.output_dtypes[st.output],
                        absl::StrCat("v", st.value))),
        "\n");
  }
  absl::StrAppend(&s, indent, "}\n");
  for (size_t o = 0; o < program_.output_dtypes.size(); ++o) {
    const std::string element = storage_type(program_.output_dtypes[o]);
    const std::string pack = absl::StrCat("Pack<", element, ", ", e, ">");
    if (unit == PackOffset::kElements) {
      absl::StrAppend(&s, indent, "*(", pack, "*)((", element, "*)a.out[", o, "] + ", at, ") = out",
                      o, ";\n");
    } else {
      absl::StrAppend(&s, indent, "((", pack, "*)a.out[", o, "])[", at, "] = out", o, ";\n");
    }
  }
  return s;
}

std::string KernelWriter::epilogue(const std::string& value, const std::string& flat,
                                   const std::string& index) const {
  std::string idx0 = unravel(0, "idx0", flat);
  if (!index.empty()) {
    idx0 = absl::StrCat("I idx0[", rank_, "] = {0};");
    for (int d = 0; d < rank(0); ++d)
      absl::StrAppend(&idx0, " idx0[", d, "] = ", index, "[", d, "];");
    idx0 += "\n";
  }
  return absl::StrCat("      const ", register_type(program_.anchor_dtype),
                      " anchor_value = ", round_to_dtype(program_.anchor_dtype, value), ";\n      ",
                      idx0, space_code(0, "idx0"), stores(flat));
}

}  // namespace kiln::runtime::cuda
