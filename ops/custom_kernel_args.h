// KilnKernelArgs, the struct every custom CUDA kernel (ops/custom_functions.h) takes by value:
// its dense row-major inputs and output with their shapes. It is written once, as the member
// list below, which gives both the host's struct (the CUDA launcher packs its bytes,
// runtime/cuda/kernel_args.cc) and the source text pasted before the user's kernel
// (runtime/cuda/render_custom_kernel.cc), so the two cannot disagree. NVRTC lays the struct
// out as the host compiler does; tests/cuda/cuda_codegen_test.cc checks its size on the device.
#ifndef KILN_OPS_CUSTOM_KERNEL_ARGS_H_
#define KILN_OPS_CUSTOM_KERNEL_ARGS_H_

namespace kiln::ops {

// X(type, name, extents): one member per line, in order. The text of each argument is also
// the CUDA source (stringized), so write it as it should read there.
#define KILN_KERNEL_ARGS_MEMBERS(X) \
  X(const void*, in, [8])           \
  X(void*, out, )                   \
  X(long long, in_shape, [8][8])    \
  X(int, in_rank, [8])              \
  X(long long, out_shape, [8])      \
  X(int, out_rank, )                \
  X(long long, out_numel, )

#define KILN_KERNEL_ARGS_MEMBER(type, name, extents) type name extents;
struct KilnKernelArgs {
  KILN_KERNEL_ARGS_MEMBERS(KILN_KERNEL_ARGS_MEMBER)
};
#undef KILN_KERNEL_ARGS_MEMBER

// The struct's CUDA definition, as every custom kernel's module carries it:
// "  const void* in[8];\n" and so on, one line per member.
#define KILN_KERNEL_ARGS_MEMBER_TEXT(type, name, extents) "  " #type " " #name #extents ";\n"
inline constexpr char kCustomKernelArgsSource[] =
    "// Kiln passes every custom kernel this struct by value: dense row-major inputs and "
    "output.\n"
    "struct KilnKernelArgs {\n" KILN_KERNEL_ARGS_MEMBERS(KILN_KERNEL_ARGS_MEMBER_TEXT) "};\n";
#undef KILN_KERNEL_ARGS_MEMBER_TEXT

}  // namespace kiln::ops

#endif  // KILN_OPS_CUSTOM_KERNEL_ARGS_H_
