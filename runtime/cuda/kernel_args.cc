// The argument blocks the launcher packs: a generated kernel's Params (laid out by
// params_layout) and a custom kernel's KilnKernelArgs; and the index error a kernel reports.
#include "runtime/cuda/kernel_args.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/gather.h"

namespace kiln::runtime::cuda {
namespace {

using ops::KilnKernelArgs;

// The launcher's block size, which tests/cuda/cuda_codegen_test.cc also checks against NVRTC's
// layout of ops::kCustomKernelArgsSource.
static_assert(sizeof(KilnKernelArgs) == kCustomKernelArgsSize);

template <class T>
void put(std::vector<std::byte>& block, size_t offset, T value) {
  std::memcpy(block.data() + offset, &value, sizeof(T));
}

}  // namespace

void throw_if_index_error(const IndexErrorWord& word) {
  if (word.flag == 0) return;
  throw Error(ops::index_error_message(static_cast<ops::OpKind>(word.op), word.index, word.extent));
}

bool has_gathers(const jit::KernelProgram& program) {
  if (program.anchor_start_input >= 0) return true;  // update_slice checks its start tensor
  if (program.anchor_index_input >= 0) return true;  // index_add checks its indices
  for (const jit::Instr& in : program.instrs) {
    if (in.kind == jit::InstrKind::kGather) return true;
  }
  return false;
}

ParamsLayout params_layout(const jit::KernelProgram& program) {
  ParamsLayout layout;
  layout.inputs = std::max<int>(1, static_cast<int>(program.input_dtypes.size()));
  layout.outputs = std::max<int>(1, static_cast<int>(program.output_dtypes.size()));
  layout.params = std::max(1, program.num_params);
  layout.spaces = std::max<int>(1, static_cast<int>(program.space_ranks.size()));
  layout.rank = 1;
  for (int r : program.space_ranks) layout.rank = std::max(layout.rank, r);
  layout.views = std::max<int>(1, static_cast<int>(program.view_patterns.size()));
  layout.in = 0;
  layout.out = layout.in + 8 * layout.inputs;
  layout.p = layout.out + 8 * layout.outputs;
  layout.shape = layout.p + 8 * layout.params;
  layout.stride = layout.shape + 8 * static_cast<size_t>(layout.spaces) * layout.rank;
  layout.offset = layout.stride + 8 * static_cast<size_t>(layout.views) * layout.rank;
  layout.size = layout.offset + 8 * layout.views;
  layout.gathers = has_gathers(program);
  if (layout.gathers) {
    layout.gather = layout.size;
    layout.index_error = layout.gather + 16 * static_cast<size_t>(layout.views);
    layout.size = layout.index_error + 8;
  }
  return layout;
}

std::string params_struct_source(const ParamsLayout& l) {
  return absl::StrCat("struct Params {\n  const void* in[", l.inputs, "];\n  void* out[", l.outputs,
                      "];\n  double p[", l.params, "];\n  i64 shape[", l.spaces, "][", l.rank,
                      "];\n  i64 stride[", l.views, "][", l.rank, "];\n  i64 offset[", l.views,
                      "];\n",
                      l.gathers ? absl::StrCat("  i64 gather[", l.views,
                                               "][2];  // extent, stride\n  u64* index_error;\n")
                                : "",
                      "};\n\n");
}

std::vector<std::byte> pack_params(const jit::KernelProgram& program,
                                   const jit::KernelLaunch& launch,
                                   const std::vector<uint64_t>& input_pointers,
                                   const std::vector<uint64_t>& output_pointers,
                                   const std::vector<double>& params, uint64_t index_error) {
  const ParamsLayout l = params_layout(program);
  std::vector<std::byte> block(l.size, std::byte{0});
  for (size_t i = 0; i < input_pointers.size(); ++i) put(block, l.in + 8 * i, input_pointers[i]);
  for (size_t i = 0; i < output_pointers.size(); ++i) {
    put(block, l.out + 8 * i, output_pointers[i]);
  }
  for (size_t i = 0; i < params.size(); ++i) put(block, l.p + 8 * i, params[i]);
  for (size_t s = 0; s < launch.spaces.size(); ++s) {
    for (size_t d = 0; d < launch.spaces[s].size(); ++d) {
      put(block, l.shape + 8 * (s * l.rank + d), launch.spaces[s][d]);
    }
  }
  for (size_t v = 0; v < launch.views.size(); ++v) {
    for (size_t d = 0; d < launch.views[v].strides.size(); ++d) {
      put(block, l.stride + 8 * (v * l.rank + d), launch.views[v].strides[d]);
    }
    put(block, l.offset + 8 * v, launch.views[v].offset);
    if (l.gathers) {
      put(block, l.gather + 16 * v, launch.views[v].gather_extent);
      put(block, l.gather + 16 * v + 8, launch.views[v].gather_stride);
    }
  }
  if (l.gathers) put(block, l.index_error, index_error);
  return block;
}

bool fits_32bit_index(const jit::KernelLaunch& launch, const std::vector<int64_t>& buffer_numels) {
  // Views index only inside their buffers (or, for index leaves, their space). A partial sum
  // of a view's offset expression is the position of an element too (the one whose other
  // indices are 0), even with negative strides (a reversed view), so every partial index is
  // bounded by these sizes too. The headroom below 2^31 covers a grid-stride loop's last
  // step past the end (at most the grid's threads, or 32 outputs per block of an outer
  // reduction), which must not wrap.
  constexpr int64_t kLimit = (int64_t{1} << 31) - (int64_t{1} << 26);
  for (const ops::Shape& s : launch.spaces) {
    if (ops::numel(s) > kLimit) return false;
  }
  for (int64_t n : buffer_numels) {
    if (n > kLimit) return false;
  }
  return true;
}

std::vector<std::byte> pack_custom_kernel_args(const std::vector<uint64_t>& input_pointers,
                                               const std::vector<std::vector<int64_t>>& shapes,
                                               uint64_t output_pointer,
                                               const std::vector<int64_t>& output_shape) {
  constexpr size_t kIn = offsetof(KilnKernelArgs, in), kOut = offsetof(KilnKernelArgs, out),
                   kInShape = offsetof(KilnKernelArgs, in_shape),
                   kInRank = offsetof(KilnKernelArgs, in_rank),
                   kOutShape = offsetof(KilnKernelArgs, out_shape),
                   kOutRank = offsetof(KilnKernelArgs, out_rank),
                   kOutNumel = offsetof(KilnKernelArgs, out_numel);
  std::vector<std::byte> block(kCustomKernelArgsSize, std::byte{0});
  for (size_t i = 0; i < input_pointers.size() && i < 8; ++i) {
    put(block, kIn + 8 * i, input_pointers[i]);
    put(block, kInRank + 4 * i, static_cast<int32_t>(shapes[i].size()));
    for (size_t d = 0; d < shapes[i].size() && d < 8; ++d) {
      put(block, kInShape + 8 * (8 * i + d), shapes[i][d]);
    }
  }
  put(block, kOut, output_pointer);
  int64_t numel = 1;
  for (size_t d = 0; d < output_shape.size() && d < 8; ++d) {
    put(block, kOutShape + 8 * d, output_shape[d]);
    numel *= output_shape[d];
  }
  put(block, kOutRank, static_cast<int32_t>(output_shape.size()));
  put(block, kOutNumel, numel);
  return block;
}

CustomKernelCall prepare_custom_kernel_call(const jit::KernelProgram& program,
                                            const jit::KernelLaunch& launch,
                                            const std::vector<uint64_t>& input_pointers,
                                            uint64_t output_pointer) {
  const ops::CustomKernel* kernel = ops::custom_kernel(program.anchor_attrs.function);
  std::vector<ops::ValueType> types;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < program.input_dtypes.size(); ++i) {
    types.push_back(ops::ValueType{launch.spaces[i + 1], program.input_dtypes[i]});
    shapes.push_back(launch.spaces[i + 1]);
  }
  CustomKernelCall call;
  call.geometry = kernel->launch(types, ops::ValueType{launch.spaces[0], program.anchor_dtype});
  call.args = pack_custom_kernel_args(input_pointers, shapes, output_pointer, launch.spaces[0]);
  return call;
}

}  // namespace kiln::runtime::cuda
