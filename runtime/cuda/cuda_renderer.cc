#include "runtime/cuda/cuda_renderer.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/block_decoders.h"
#include "runtime/cuda/cuda_preamble.h"
#include "runtime/cuda/family_renderers.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/kernel_writer.h"

namespace kiln::runtime::cuda {
namespace {

using jit::AnchorKind;
using jit::Instr;
using jit::InstrKind;
using jit::KernelProgram;

// The user's device functions this kernel calls, each once, after the preamble.
void append_custom_functions(const KernelProgram& program, std::string& s) {
  std::vector<int> done;
  for (const Instr& in : program.instrs) {
    if (in.kind != InstrKind::kCustom) continue;
    if (std::find(done.begin(), done.end(), in.function) != done.end()) continue;
    done.push_back(in.function);
    const ops::CustomFunction* f = ops::custom_function(in.function);
    absl::StrAppend(&s, "// custom elementwise function '", f->name, "' (user source)\n",
                    f->cuda_source, "\n\n");
  }
}

// The module around a family's `body`: the preamble, the custom functions it calls, the
// program's printed form as a comment, the Params struct, then the entry points.
std::string assemble_module(const KernelWriter& writer, IndexWidths widths,
                            const std::string& body) {
  const KernelProgram& program = writer.program();
  std::string s = preamble();
  if (std::any_of(program.input_dtypes.begin(), program.input_dtypes.end(),
                  [](DType dt) { return is_block_quantized(dt); })) {
    s += kBlockDecodersSource;
  }
  append_custom_functions(program, s);
  absl::StrAppend(&s, "// kernel ", program.name, " (", anchor_name(program.anchor), ")\n");
  const std::string printed = program.to_string();
  for (absl::string_view line : absl::StrSplit(printed, '\n')) {
    if (!line.empty()) absl::StrAppend(&s, "//   ", line, "\n");
  }
  absl::StrAppend(&s, params_struct_source(writer.layout()));
  absl::StrAppend(&s,
                  "template <class I>\n__device__ void body(const Params& a, const Split& split) "
                  "{\n  (void)split;\n",
                  body, "}\n\n");
  for (const bool wide : {false, true}) {
    if (widths == (wide ? IndexWidths::k32 : IndexWidths::k64)) continue;
    absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", kThreadsPerBlock, ") ",
                    entry_name(program, wide), "(const Params a, const Split split) { body<",
                    wide ? "long long" : "int", ">(a, split); }\n");
  }
  return s;
}

}  // namespace

std::string render_cuda(const jit::KernelProgram& program, IndexWidths widths) {
  const KernelWriter writer(program);
  switch (program.anchor) {
    case AnchorKind::kNone:
      return assemble_module(writer, widths, render_pointwise(writer));
    case AnchorKind::kReduce:
    case AnchorKind::kArgReduce:
      return assemble_module(writer, widths, render_reduction(writer));
    case AnchorKind::kRowNorm:
      return assemble_module(writer, widths, render_row_norm(writer));
    case AnchorKind::kScan:
      return assemble_module(writer, widths, render_cumsum(writer));
    case AnchorKind::kTopk:
      return assemble_module(writer, widths, render_topk(writer));
    case AnchorKind::kMatmul:
      return assemble_module(writer, widths, render_matmul(writer));
    case AnchorKind::kConcat:
      return assemble_module(writer, widths, render_concat(writer));
    case AnchorKind::kUpdateSlice:
      return assemble_module(writer, widths, render_update_slice(writer));
    case AnchorKind::kIndexAdd:
      return assemble_module(writer, widths, render_index_add(writer));
    case AnchorKind::kAttention:
      return assemble_module(writer, widths, render_attention(writer));
    case AnchorKind::kCustomKernel:
      return render_custom_kernel(program);
    case AnchorKind::kCollective:  // shown in dumps; there is nothing to compile
      return absl::StrCat("// ", program.name,
                          ": a collective, run by the process group's communicator (MPI or "
                          "NCCL), not a generated kernel\n");
  }
  return {};  // unreachable: every anchor kind is handled above
}

std::string entry_name(const jit::KernelProgram& program, bool wide) {
  return program.name + (wide ? "_i64" : "_i32");
}

}  // namespace kiln::runtime::cuda
