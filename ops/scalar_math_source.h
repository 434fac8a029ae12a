// The text of ops/scalar_math.inc, for devices that compile it at run time: every generated
// CUDA module carries it in its preamble, so kernels call the same functors the host does.
// CMake writes the definition (cmake/scalar_math_source.cc.in) from the file itself, so the
// text can never drift from what the host compiled.
#ifndef KILN_OPS_SCALAR_MATH_SOURCE_H_
#define KILN_OPS_SCALAR_MATH_SOURCE_H_

namespace kiln::ops {

extern const char* const kScalarMathSource;

}  // namespace kiln::ops

#endif  // KILN_OPS_SCALAR_MATH_SOURCE_H_
