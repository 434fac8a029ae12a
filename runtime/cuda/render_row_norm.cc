#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda/family_renderers.h"

namespace kiln::runtime::cuda {

using jit::KernelProgram;
using ops::OpKind;

// One block per row along the anchor axis. When the launch gives the block enough dynamic
// shared memory for the row, pass 1 keeps the row's values (after the prologue) there and
// passes 2 and 3 read them back: the row crosses global memory once. Otherwise every pass
// recomputes the row from global memory. Each thread touches the same positions k in every
// pass, so the cache needs no barrier of its own.
// The start of every row op: extent and rows, then a block-stride loop over the rows that
// sets idx1 (space 1's index) to the row's first element; the caller closes the loop.
std::string open_row_loop(const KernelWriter& writer) {
  const int axis = writer.program().anchor_attrs.axis;
  std::vector<int> row_dims;  // every dim but the axis: which row
  for (int d = 0; d < writer.rank(1); ++d) {
    if (d != axis) row_dims.push_back(d);
  }
  const std::string extent =  // a 0-d x is one row of one element
      writer.rank(1) == 0 ? "(I)1" : absl::StrCat("(I)a.shape[1][", axis, "]");
  return absl::StrCat("  const I extent = ", extent, ";\n  const I rows = (", writer.numel(1),
                      ") / (extent > 0 ? extent : (I)1);\n",
                      "  for (I row = blockIdx.x; row < rows; row += gridDim.x) {\n", "    I idx1[",
                      writer.index_rank(), "] = {0};\n    ", writer.unravel_dims(row_dims, "row"),
                      "\n");
}

// Inside the row loop: the block's dynamic shared memory as a cache of the row's values of
// C type `cached`, and whether the launch gave enough of it for the whole row.
std::string vector_rows_condition(const KernelProgram& program, int axis, int rank, int e,
                                  const std::string& joiner) {
  std::vector<std::string> pointers, conditions;
  for (const jit::Instr& in : program.instrs) {
    if (in.space != 1 || in.kind != jit::InstrKind::kLoad) continue;
    pointers.push_back(absl::StrCat("(u64)a.in[", in.input, "]"));
    std::string c = absl::StrCat("a.stride[", in.view, "][", axis, "] == 1 && a.offset[", in.view,
                                 "] % ", e, " == 0");
    for (int d = 0; d < rank; ++d) {
      if (d != axis) absl::StrAppend(&c, " && a.stride[", in.view, "][", d, "] % ", e, " == 0");
    }
    conditions.push_back(c);
  }
  conditions.insert(conditions.begin(),
                    absl::StrCat("((", absl::StrJoin(pointers, " | "), ") & 15) == 0"));
  return absl::StrJoin(conditions, joiner);
}

std::string declare_row_cache(const std::string& cached) {
  return absl::StrCat("    ", cached, "* const row_cache = dynamic_shared<", cached, ">();\n",
                      "    const bool persistent = (u64)dynamic_shared_bytes() >= (u64)extent * "
                      "sizeof(",
                      cached, ");\n");
}

namespace {

// Elements per thread of pass 1's 16-byte loads: 16 / the widest element space 1 loads; 0
// (scalar only) where widest_vector_load rules it out or space 1 loads nothing.
int row_vector_width(const KernelProgram& program) {
  const int widest = widest_vector_load(program, 1);
  return widest > 0 ? 16 / widest : 0;
}

}  // namespace

// Data in f32, f16 or bf16 is held, accumulated and normalized in f32 (FP64 runs at a
// fraction of f32's rate, and was most of the instructions per element); f64 data keeps
// f64. Each row's max, sums and the reciprocal (softmax), log (log_softmax) or reciprocal
// square root (the norms) are computed once, so an element costs a subtraction, a
// multiply and at most one exp. Softmax keeps exp(x - max) in the row cache, so pass 3
// does not recompute it. rms_norm sums squares in pass 1 (it has no mean to subtract).
// Pass 1 reads the row as 16-byte vectors when every load of the row is contiguous along
// it and aligned (checked once per launch), then the remainder one element per thread.
std::string render_row_norm(const KernelWriter& writer) {
  const KernelProgram& program = writer.program();
  std::string s;
  const int axis = program.anchor_attrs.axis;
  const OpKind op = program.anchor_op;
  const std::string t = register_type(program.anchor_dtype);
  const int operand = program.anchor_operands[0];
  const std::string cached = register_type(program.instrs[operand].dtype);
  const bool single = cached == "float";
  const std::string acc = single ? "float" : "double";
  auto lit = [&](const std::string& v) { return single ? absl::StrCat(v, "f") : v; };
  auto fn = [&](const std::string& f) { return single ? absl::StrCat(f, "f") : f; };
  const std::string inf = absl::StrCat("(", lit("1.0"), " / ", lit("0.0"), ")");
  const bool softmax = op == OpKind::Softmax || op == OpKind::LogSoftmax;
  const bool rms = op == OpKind::RmsNorm;
  const int rank = writer.rank(1);
  // Softmax writes exp(x - max) back over x in the cache when the cache holds acc values.
  const bool cache_exp = op == OpKind::Softmax && cached == acc;
  int e = rank > 0 ? row_vector_width(program) : 0;
  absl::StrAppend(&s, "  __shared__ ", acc, " shared[32];\n  const ", acc, " eps = ",
                  program.anchor_param >= 0
                      ? absl::StrCat("(", acc, ")a.p[", program.anchor_param, "]")
                      : lit("0.0"),
                  ";\n  (void)eps;\n");
  if (e > 1) {
    // Every load's row starts 16-byte aligned and steps by 1 along the axis.
    absl::StrAppend(&s, "  const bool vectorizable = ",
                    vector_rows_condition(program, axis, rank, e, " &&\n      "), ";\n");
  }
  absl::StrAppend(&s, open_row_loop(writer), declare_row_cache(cached));
  // The flat index of the row's element k in space 0 (whose shape is space 1's).
  absl::StrAppend(&s, "    idx1[", axis,
                  "] = 0;\n    const I row_base = ", writer.flatten(1, "idx1"),
                  ";\n    const I row_step = (I)1");
  for (int d = axis + 1; d < rank; ++d) absl::StrAppend(&s, " * (I)a.shape[1][", d, "]");
  absl::StrAppend(&s, ";\n");
  // Pass 1's fold of x: the max (softmax), the sum (layer_norm) or the sum of squares.
  const std::string fold1 = softmax ? "      first = x > first ? x : first;\n"
                                    : (rms ? "      second += x * x;\n" : "      first += x;\n");
  absl::StrAppend(&s, "    ", acc, " first = ", softmax ? absl::StrCat("-", inf) : lit("0.0"),
                  ";\n    ", acc, " second = ", lit("0.0"), ";\n    (void)first;\n");
  std::string groups = "(I)0";
  if (e > 1) {
    groups = "groups";
    // Pass 1 in vectors: thread t reads elements [E g, E g + E) for g = t, t + blockDim.x,
    // ... and writes them to the cache as 16-byte stores where the cached type allows.
    const int per_store = 16 / (single ? 4 : 8);
    const bool packed_cache = e % per_store == 0;
    absl::StrAppend(&s, "    const I groups = vectorizable ? extent / ", e, " : (I)0;\n",
                    "    for (I g = threadIdx.x; g < groups; g += blockDim.x) {\n", "      idx1[",
                    axis, "] = g * ", e, ";\n");
    absl::StrAppend(&s, writer.vector_loads(1, e, "idx1", "      "));
    absl::StrAppend(&s, "      ", cached, " values[", e, "];\n      #pragma unroll\n",
                    "      for (int e = 0; e < ", e, "; ++e) {\n", writer.space_code(1, "", "e"),
                    "      values[e] = v", operand, ";\n      const ", acc, " x = (", acc, ")v",
                    operand, ";\n", fold1, "      }\n");
    if (packed_cache) {
      absl::StrAppend(&s, "      if (persistent) {\n        #pragma unroll\n",
                      "        for (int j = 0; j < ", e / per_store, "; ++j) {\n          Pack<",
                      cached, ", ", per_store, "> q;\n          #pragma unroll\n",
                      "          for (int c = 0; c < ", per_store, "; ++c) q.v[c] = values[j * ",
                      per_store, " + c];\n          ((Pack<", cached, ", ", per_store,
                      ">*)(row_cache + g * ", e, "))[j] = q;\n        }\n      }\n");
    } else {
      absl::StrAppend(&s, "      if (persistent) {\n        #pragma unroll\n",
                      "        for (int e = 0; e < ", e, "; ++e) row_cache[g * ", e,
                      " + e] = values[e];\n      }\n");
    }
    absl::StrAppend(&s, "    }\n");
  }
  // Pass 1, one element per thread (all of it, or what the vectors left).
  absl::StrAppend(&s, "    for (I k = ", groups, " * ", std::max(e, 1),
                  " + threadIdx.x; k < extent; k += blockDim.x) {\n      idx1[", axis, "] = k;\n",
                  writer.space_code(1, "idx1"), "      if (persistent) row_cache[k] = v", operand,
                  ";\n      const ", acc, " x = (", acc, ")v", operand, ";\n", fold1, "    }\n");
  const std::string block_sum =
      absl::StrCat("block_reduce<", acc, ">(second, [](", acc, " p, ", acc,
                   " q) { return p + q; }, ", lit("0.0"), ", shared)");
  if (rms) {
    absl::StrAppend(&s, "    second = ", block_sum, ";\n");
  } else {
    absl::StrAppend(&s, "    first = block_reduce<", acc, ">(first, [](", acc, " p, ", acc,
                    " q) { return ", softmax ? "p > q ? p : q" : "p + q", "; }, ",
                    softmax ? absl::StrCat("-", inf) : lit("0.0"), ", shared);\n");
  }
  if (softmax) {
    absl::StrAppend(&s, "    if (first == ", inf, " || first == -", inf, ") first = ", lit("0.0"),
                    ";\n");
  }
  if (op == OpKind::LayerNorm) absl::StrAppend(&s, "    first /= (", acc, ")extent;\n");
  // Later passes read x again: from the cache, or recomputed from global memory. With the
  // 16-byte path, they go in the groups pass 1 took (thread t: elements [E g, E g + E) for
  // g = t, t + blockDim.x, ...), reading a group from the cache as packs or, when the row is
  // not cached, from global memory as one 16-byte load per input; then the remainder one
  // element per thread, also as in pass 1. So every thread reads back the cache positions it
  // wrote itself.
  const int per_store = 16 / (single ? 4 : 8);
  const bool packed_cache = e > 1 && e % per_store == 0;
  // A group's x (or, with `exp`, exp(x - max)) into xs[0..E).
  auto group_again = [&](bool exp) {
    std::string g = absl::StrCat("      idx1[", axis, "] = g * ", e, ";\n      ", acc, " xs[", e,
                                 "];\n      if (persistent) {\n");
    if (packed_cache) {
      absl::StrAppend(&g, "        #pragma unroll\n        for (int j = 0; j < ", e / per_store,
                      "; ++j) {\n          const Pack<", cached, ", ", per_store,
                      "> q = ((const Pack<", cached, ", ", per_store, ">*)(row_cache + g * ", e,
                      "))[j];\n          #pragma unroll\n          for (int c = 0; c < ", per_store,
                      "; ++c) xs[j * ", per_store, " + c] = (", acc, ")q.v[c];\n        }\n");
    } else {
      absl::StrAppend(&g, "        #pragma unroll\n        for (int e = 0; e < ", e,
                      "; ++e) xs[e] = (", acc, ")row_cache[g * ", e, " + e];\n");
    }
    absl::StrAppend(&g, "      } else {\n");
    absl::StrAppend(&g, writer.vector_loads(1, e, "idx1", "        "));
    absl::StrAppend(&g, "        #pragma unroll\n        for (int e = 0; e < ", e, "; ++e) {\n",
                    writer.space_code(1, "", "e"), "        xs[e] = ",
                    exp ? absl::StrCat(fn("exp"), "((", acc, ")v", operand, " - first)")
                        : absl::StrCat("(", acc, ")v", operand),
                    ";\n        }\n      }\n");
    return g;
  };
  auto x_again = [&](const std::string& k) {
    return absl::StrCat("      idx1[", axis, "] = ", k, ";\n      ", acc, " x;\n",
                        "      if (persistent) {\n        x = (", acc, ")row_cache[", k, "];\n",
                        "      } else {\n", writer.space_code(1, "idx1"), "        x = (", acc,
                        ")v", operand, ";\n      }\n");
  };
  const std::string group_loop =
      absl::StrCat("    for (I g = threadIdx.x; g < groups; g += blockDim.x) {\n");
  const std::string tail_loop = absl::StrCat("    for (I k = ", groups, " * ", std::max(e, 1),
                                             " + threadIdx.x; k < extent; k += blockDim.x) {\n");
  if (!rms) {
    // Pass 2: the sum of exp(x - max) (softmax) or of squared deviations (layer_norm).
    const std::string fold2 =
        softmax ? absl::StrCat("      const ", acc, " ex = ", fn("exp"), "(x - first);\n",
                               cache_exp ? "      if (persistent) row_cache[k] = ex;\n" : "",
                               "      second += ex;\n")
                : "      second += (x - first) * (x - first);\n";
    if (e > 1) {
      absl::StrAppend(&s, group_loop, group_again(false), "      #pragma unroll\n",
                      "      for (int e = 0; e < ", e, "; ++e) {\n      const I k = g * ", e,
                      " + e;\n      (void)k;\n      const ", acc, " x = xs[e];\n", fold2,
                      "      }\n    }\n");
    }
    absl::StrAppend(&s, tail_loop, x_again("k"), fold2, "    }\n    second = ", block_sum, ";\n");
  }
  // The row's constants, once: y = exp(x - max) * scale, (x - max) - log_sum, or
  // (x - mean) * scale * w (+ b).
  std::string y;
  if (op == OpKind::Softmax) {
    absl::StrAppend(&s, "    const ", acc, " scale = ", lit("1.0"), " / second;\n");
    y = "ex * scale";
  } else if (op == OpKind::LogSoftmax) {
    // (x - max) - log(sum), never x - (max + log(sum)): near a large max the sum's log would
    // be rounded away in the shift.
    absl::StrAppend(&s, "    const ", acc, " log_sum = ", fn("log"), "(second);\n");
    y = "(x - first) - log_sum";
  } else {
    absl::StrAppend(&s, "    const ", acc, " scale = ", lit("1.0"), " / ", fn("sqrt"),
                    "(second / (", acc, ")extent + eps);\n");
    y = absl::StrCat(rms ? "x" : "(x - first)", " * scale * (", acc, ")v",
                     program.anchor_operands[1]);
    if (op == OpKind::LayerNorm) absl::StrAppend(&y, " + (", acc, ")v", program.anchor_operands[2]);
  }
  // The weight and bias of element k (layer_norm, rms_norm).
  std::string weights;
  if (op == OpKind::LayerNorm || rms) {
    absl::StrAppend(&weights, "      I idx2[", writer.index_rank(), "] = {0}; idx2[0] = k;\n",
                    writer.space_code(2, "idx2"));
    if (op == OpKind::LayerNorm)
      absl::StrAppend(&weights, "      I idx3[", writer.index_rank(), "] = {0}; idx3[0] = k;\n",
                      writer.space_code(3, "idx3"));
  }
  // Pass 3: the output.
  if (e > 1) {
    // A group's outputs go out as one 16-byte store per output when the row lies along the
    // innermost dim in whole vectors and every output is aligned (and no wider per group).
    bool packed_out = axis == rank - 1;
    std::vector<std::string> outs;
    for (size_t o = 0; o < program.output_dtypes.size(); ++o) {
      packed_out = packed_out && dtype_size(program.output_dtypes[o]) * e <= 16;
      outs.push_back(absl::StrCat("(u64)a.out[", o, "]"));
    }
    absl::StrAppend(&s, group_loop, group_again(cache_exp), "      ", t, " value[", e, "];\n",
                    "      #pragma unroll\n      for (int e = 0; e < ", e,
                    "; ++e) {\n      const I k = g * ", e, " + e;\n      (void)k;\n",
                    "      const ", acc, cache_exp ? " ex" : " x", " = xs[e];\n");
    if (op == OpKind::Softmax && !cache_exp)
      absl::StrAppend(&s, "      const ", acc, " ex = ", fn("exp"), "(x - first);\n");
    absl::StrAppend(&s, weights, "      value[e] = (", t, ")(", y, ");\n      }\n");
    std::string scalar_stores = absl::StrCat(
        "        #pragma unroll\n        for (int e = 0; e < ", e, "; ++e) {\n        idx1[", axis,
        "] = g * ", e, " + e;\n        const I flat = row_base + (g * ", e, " + e) * row_step;\n",
        writer.epilogue("value[e]", "flat", "idx1"), "        }\n");
    if (packed_out) {
      absl::StrAppend(
          &s, "      if (((", absl::StrJoin(outs, " | "), ") & 15) == 0 && extent % ", e,
          " == 0) {\n",
          vector_epilogue(writer, e, "value", "idx1", absl::StrCat("row_base + g * ", e)),
          "      } else {\n", scalar_stores, "      }\n    }\n");
    } else {
      absl::StrAppend(&s, scalar_stores, "    }\n");
    }
  }
  absl::StrAppend(&s, tail_loop);
  if (cache_exp) {
    absl::StrAppend(&s, "      idx1[", axis, "] = k;\n      ", acc, " ex;\n",
                    "      if (persistent) {\n        ex = row_cache[k];\n      } else {\n",
                    writer.space_code(1, "idx1"), "        ex = ", fn("exp"), "((", acc, ")v",
                    operand, " - first);\n      }\n");
  } else {
    absl::StrAppend(&s, x_again("k"));
    if (op == OpKind::Softmax)
      absl::StrAppend(&s, "      const ", acc, " ex = ", fn("exp"), "(x - first);\n");
  }
  absl::StrAppend(&s, weights, "      const I flat = row_base + k * row_step;\n",
                  writer.epilogue(absl::StrCat("(", t, ")(", y, ")"), "flat", "idx1"), "    }\n");
  // Pass 1 of the next row writes cache positions this row's pass 3 reads on other threads.
  if (e > 1) absl::StrAppend(&s, "    __syncthreads();\n");
  absl::StrAppend(&s, "  }\n");
  return s;
}

}  // namespace kiln::runtime::cuda
