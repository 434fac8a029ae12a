// The text of runtime/cpu/simd_math-inl.h, for the kernels the CPU code generator compiles
// at run time (compiled_pointwise.h): each one's source holds it, so compiled loops apply the
// same math as the executor. CMake writes the definition (cmake/simd_math_inl_source.cc.in)
// from the file itself, so the text can never drift from what the executor was built with.
#ifndef KILN_RUNTIME_CPU_SIMD_MATH_INL_SOURCE_H_
#define KILN_RUNTIME_CPU_SIMD_MATH_INL_SOURCE_H_

namespace kiln::runtime::cpu {

extern const char* const kSimdMathInlSource;

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_MATH_INL_SOURCE_H_
