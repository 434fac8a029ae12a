// Reading and writing tensors as numpy .npy files (format versions 1.0-3.0, little-endian,
// C order). BF16 has no numpy dtype: it is written as '<f4' (exactly) and read back from it.
#ifndef KILN_IO_H_
#define KILN_IO_H_

#include <string>

#include "kiln/tensor.h"

namespace kiln {

Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);  // sync point

}  // namespace kiln

#endif  // KILN_IO_H_
