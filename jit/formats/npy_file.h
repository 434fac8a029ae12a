// numpy .npy files: the container of trace-folder inputs and outputs.
#ifndef KILN_JIT_FORMATS_NPY_FILE_H_
#define KILN_JIT_FORMATS_NPY_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/value_type.h"

namespace kiln::jit {

struct NpyArray {
  ops::ValueType type;
  std::shared_ptr<base::Buffer> data;  // row-major
};

// Reads versions 1.0-3.0 with dtypes |b1 <i4 <i8 <f2 <f4 <f8 in C order. Rejects anything
// else (big-endian, Fortran order, other dtypes, a header over 1 MiB, a data size that does
// not match the shape) with a message naming the file and the problem.
absl::StatusOr<NpyArray> read_npy(const std::string& path);

// Writes version 1.0 through a temporary file renamed into place, so a failure leaves any
// existing file as it was. BF16 data is written as <f4 (exact).
absl::Status write_npy(const std::string& path, const ops::ValueType& type,
                       const base::Buffer& data);

}  // namespace kiln::jit

#endif  // KILN_JIT_FORMATS_NPY_FILE_H_
