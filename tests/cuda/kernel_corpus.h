// Kernel corpora for the CUDA tests: small expressions whose plans cover every kernel family
// in every dtype, so the renderer's output is compiled (cuda_codegen_test) and run on the
// host (cuda_emulation_test) for each.
#ifndef KILN_TESTS_KERNEL_CORPUS_H_
#define KILN_TESTS_KERNEL_CORPUS_H_

#include <vector>

#include "kiln/kiln.h"

namespace kiln {

// Unevaluated results over tiny shapes: every family, every dtype.
std::vector<Tensor> kernel_corpus();

}  // namespace kiln

#endif  // KILN_TESTS_KERNEL_CORPUS_H_
