// Reading and writing tensors as numpy .npy files (format versions 1.0-3.0, little-endian,
// C order). BF16 has no numpy dtype: it is written as '<f4' (exactly) and read back from it.
#ifndef KILN_IO_H_
#define KILN_IO_H_

#include <map>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);  // sync point

// .safetensors (dtypes BOOL I32 I64 F16 BF16 F32 F64): the file is mapped and every header
// entry is checked (dtype, shape, ranges inside the data, sizes, no overlaps or holes, a
// header under 100 MB) before any data is read; a bad file throws kiln::Error naming it.
std::map<std::string, Tensor> load_safetensors(const std::string& path);
// Part `part` of `parts` equal slices along `axis` of the tensor `name`, reading from the
// file only the header and that slice's bytes (one read per contiguous run): how each rank
// of a tensor-parallel group loads its shard of a weight (kiln/distributed.h).
Tensor load_safetensors_shard(const std::string& path, const std::string& name, int axis, int part,
                              int parts);
// Writes through a temporary file renamed into place (a sync point for the tensors).
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors);

}  // namespace kiln

#endif  // KILN_IO_H_
