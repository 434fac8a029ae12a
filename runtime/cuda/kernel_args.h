// The bytes a generated kernel receives: its Params struct, laid out here once and used both
// by the renderer (which prints the struct) and by the launcher (which packs the values), so
// the two cannot disagree. tests/cuda/cuda_codegen_test.cc has NVRTC check every layout with
// static_asserts on sizeof and offsetof.
#ifndef KILN_RUNTIME_CUDA_KERNEL_ARGS_H_
#define KILN_RUNTIME_CUDA_KERNEL_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "jit/fusion/kernel_ir.h"
#include "ops/custom_functions.h"

namespace kiln::runtime::cuda {

// struct Params {
//   const void* in[inputs]; void* out[outputs]; double p[params];
//   i64 shape[spaces][rank]; i64 stride[views][rank]; i64 offset[views];
//   // only in programs with gathers (jit::InstrKind::kGather):
//   i64 gather[views][2];  // per view: the gathered axis's extent and stride
//   u64* index_error;      // where the first out-of-range index is reported (IndexErrorWord)
// };  every member 8 bytes wide, so there is no padding.
struct ParamsLayout {
  int inputs = 1, outputs = 1, params = 1, spaces = 1, rank = 1, views = 1;  // array extents
  bool gathers = false;                                                      // has the last two
  size_t in = 0, out = 0, p = 0, shape = 0, stride = 0, offset = 0;          // byte offsets
  size_t gather = 0, index_error = 0;
  size_t size = 0;
};

// The device words a gather reports its first out-of-range index into: zero until then.
// The generated code (the preamble's kiln_report_index_error) sets `flag` first with an
// atomic compare-and-swap, so one report wins; the host reads them after the launches.
struct IndexErrorWord {
  uint64_t flag = 0;
  int64_t index = 0;   // the index as given
  int64_t extent = 0;  // the extent of the axis it indexes
  int64_t op = 0;      // the gather's ops::OpKind
};
static_assert(sizeof(IndexErrorWord) == 32);

// Throws the kiln::Error of ops/gather.h when `word` holds a report; a no-op otherwise.
void throw_if_index_error(const IndexErrorWord& word);

// Whether `program` may report an index out of range (its Params carry the gather members
// and the error word): it gathers, or it is an update_slice that reads a start tensor.
bool has_gathers(const jit::KernelProgram& program);

ParamsLayout params_layout(const jit::KernelProgram& program);

// The C++ declaration of the struct (the renderer prints it).
std::string params_struct_source(const ParamsLayout& layout);

// The packed block for one launch: device pointers per input and output slot, the launch's
// sizes, strides and offsets, and the parameter values per program parameter slot; for a
// program with gathers, each view's gathered extent and stride and `index_error`, the device
// address of an IndexErrorWord.
std::vector<std::byte> pack_params(const jit::KernelProgram& program,
                                   const jit::KernelLaunch& launch,
                                   const std::vector<uint64_t>& input_pointers,
                                   const std::vector<uint64_t>& output_pointers,
                                   const std::vector<double>& params, uint64_t index_error = 0);

// The Split argument every generated entry point takes after Params (the preamble's
// `struct Split`): where a split reduction's partials go, how many chunks, which phase.
struct SplitArgs {
  uint64_t scratch = 0;
  int64_t chunks = 1;
  int64_t phase = 0;
};
static_assert(sizeof(SplitArgs) == 24);

// Whether the _i32 entry point may run this launch: every iteration space and every buffer
// it reads or writes has fewer than 2^31 - 2^26 elements (the rest is headroom for loop
// counters stepping past the end).
bool fits_32bit_index(const jit::KernelLaunch& launch, const std::vector<int64_t>& buffer_numels);

// The custom kernel argument struct (ops::KilnKernelArgs, ops/custom_kernel_args.h) packed for
// one launch.
std::vector<std::byte> pack_custom_kernel_args(const std::vector<uint64_t>& input_pointers,
                                               const std::vector<std::vector<int64_t>>& shapes,
                                               uint64_t output_pointer,
                                               const std::vector<int64_t>& output_shape);
inline constexpr size_t kCustomKernelArgsSize = 696;

// One launch of a user's custom kernel: the grid, block and shared memory its definition
// asks for, and its packed argument struct. The backend and the host emulation both launch
// from this.
struct CustomKernelCall {
  ops::CustomKernelLaunch geometry;
  std::vector<std::byte> args;
};
CustomKernelCall prepare_custom_kernel_call(const jit::KernelProgram& program,
                                            const jit::KernelLaunch& launch,
                                            const std::vector<uint64_t>& input_pointers,
                                            uint64_t output_pointer);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_KERNEL_ARGS_H_
