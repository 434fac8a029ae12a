#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelProgram;

// Elements per thread of the 16-byte path: E = 16 / the widest element loaded or stored, 0
// where widest_vector_load rules the path out. A pointwise program has one space, space 0.
int vector_width(const KernelProgram& program) {
  const int loaded = widest_vector_load(program, 0);
  if (loaded < 0) return 0;
  int widest = std::max(loaded, 1);
  for (DType dt : program.output_dtypes) widest = std::max(widest, dtype_size(dt));
  return 16 / widest;
}

// A load whose view is not the output's own layout (a broadcast bias row or column): it
// reads through its strides from the group's first multi-index.
bool indirect(const KernelProgram& program, const Instr& in) {
  return in.kind == InstrKind::kLoad &&
         program.view_patterns[in.view].access != jit::ViewAccess::kContiguous;
}

// One thread per element of space 0, in a grid-stride loop.
std::string scalar_pointwise_loop(const KernelWriter& writer, const std::string& first) {
  return absl::StrCat("  for (I i = ", first,
                      " + (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < total; i += "
                      "(I)gridDim.x * (I)blockDim.x) {\n    ",
                      writer.unravel(0, "idx0", "i"), writer.space_code(0, "idx0"),
                      writer.stores("i"), "  }\n");
}

// E consecutive outputs per thread, every load and store one aligned vector (Pack):
//  - a contiguous load reads vector g of its input;
//  - a broadcast load reads E consecutive elements at the group's first offset (its last
//    stride is 1, a bias row) or one element for all E (its last stride is 0, a column).
// That needs 16-byte aligned pointers, groups that stay in one row (E divides the last
// dimension) and, for indirect loads with last stride 1, offsets and strides that are
// multiples of E. Otherwise (checked once per launch) every element takes the scalar loop,
// which also finishes the tail.
std::string vector_pointwise(const KernelWriter& writer, int e) {
  const KernelProgram& program = writer.program();
  const int last = writer.rank(0) - 1;
  std::vector<std::string> pointers, conditions;
  for (size_t i = 0; i < program.input_dtypes.size(); ++i)
    pointers.push_back(absl::StrCat("(u64)a.in[", i, "]"));
  for (size_t o = 0; o < program.output_dtypes.size(); ++o)
    pointers.push_back(absl::StrCat("(u64)a.out[", o, "]"));
  conditions.push_back(absl::StrCat("((", absl::StrJoin(pointers, " | "), ") & 15) == 0"));
  bool any_indirect = false;
  for (const Instr& in : program.instrs) {
    if (!indirect(program, in)) continue;
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
      absl::StrCat("  const bool vectorizable = ", absl::StrJoin(conditions, " &&\n      "), ";\n",
                   "  const I vectors = vectorizable ? total / ", e, " : (I)0;\n",
                   "  for (I g = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; g < "
                   "vectors; g += (I)gridDim.x * (I)blockDim.x) {\n");
  if (any_indirect) absl::StrAppend(&s, "    ", writer.unravel(0, "idx0", absl::StrCat("g * ", e)));
  for (size_t k = 0; k < program.instrs.size(); ++k) {
    const Instr& in = program.instrs[k];
    if (in.kind != InstrKind::kLoad) continue;
    const std::string pack =
        absl::StrCat("Pack<", storage_type(program.input_dtypes[in.input]), ", ", e, ">");
    const std::string ptr = absl::StrCat("((const ", storage_type(program.input_dtypes[in.input]),
                                         "*)a.in[", in.input, "])");
    if (!indirect(program, in)) {
      absl::StrAppend(&s, "    const ", pack, " ld", k, " = ((const ", pack, "*)a.in[", in.input,
                      "])[g];\n");
      continue;
    }
    absl::StrAppend(&s, "    ", pack, " ld", k,
                    ";\n    {\n      const I at = ", writer.offset(in.view, 0, "idx0"),
                    ";\n      if (a.stride[", in.view, "][", last,
                    "] == 0) {\n        #pragma unroll\n        for (int e = 0; e < ", e,
                    "; ++e) ld", k, ".v[e] = ", ptr, "[at];\n      } else {\n        ld", k,
                    " = *(const ", pack, "*)(", ptr, " + at);\n      }\n    }\n");
  }
  absl::StrAppend(&s, writer.vector_stores(e, writer.space_code(0, "", "e"), "g",
                                           KernelWriter::PackOffset::kVectors, "    "));
  absl::StrAppend(
      &s, "  }\n  // The tail (and everything, when not vectorizable), one element per thread.\n",
      scalar_pointwise_loop(writer, absl::StrCat("vectors * ", e)));
  return s;
}

}  // namespace

int widest_vector_load(const KernelProgram& program, int space) {
  int widest = 0;
  for (const Instr& in : program.instrs) {
    if (in.space != space) continue;
    if (in.kind == InstrKind::kIndexLeaf || in.kind == InstrKind::kGather) return -1;
    if (in.kind != InstrKind::kLoad) continue;
    if (program.view_patterns[in.view].access == jit::ViewAccess::kStrided) return -1;
    if (is_block_quantized(program.input_dtypes[in.input])) return -1;  // decoded per element
    widest = std::max(widest, dtype_size(program.input_dtypes[in.input]));
  }
  return widest;
}

int pointwise_vector_width(const KernelProgram& program) {
  // A rank-0 output is one element: nothing to vectorize.
  const int e = program.space_ranks[0] > 0 ? vector_width(program) : 0;
  return e > 1 ? e : 1;
}

// The vector path where the program allows it (vector_width), finished by the scalar loop;
// the scalar loop alone otherwise.
std::string render_pointwise(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  std::string s = absl::StrCat("  const I total = ", writer.numel(0), ";\n");
  const int e = pointwise_vector_width(program);
  absl::StrAppend(&s, e > 1 ? vector_pointwise(writer, e) : scalar_pointwise_loop(writer, "(I)0"));
  return s;
}

}  // namespace kiln::runtime::cuda
