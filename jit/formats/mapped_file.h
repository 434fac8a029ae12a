// A whole file mapped into memory for the readers of weight files (.safetensors, .gguf),
// read-only, or private and writable where tensors view the mapping: a kernel updating one
// in place then copies the page it writes and never changes the file.
#ifndef KILN_JIT_FORMATS_MAPPED_FILE_H_
#define KILN_JIT_FORMATS_MAPPED_FILE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kiln/error.h"

namespace kiln::jit {

class MappedFile {
 public:
  enum class Access {
    kReadOnly,
    // Copy on write. Under strict overcommit accounting (vm.overcommit_memory=2) the whole
    // file counts against the commit limit.
    kPrivateWritable,
  };

  // Maps `path`; a file that cannot be opened, examined or mapped throws what `fail` makes
  // of the reason. An empty file maps to no bytes.
  static std::shared_ptr<const MappedFile> open(
      const std::string& path, Access access, const std::function<Error(const std::string&)>& fail);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const unsigned char* bytes() const { return static_cast<const unsigned char*>(data_); }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;

  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln::jit

#endif  // KILN_JIT_FORMATS_MAPPED_FILE_H_
