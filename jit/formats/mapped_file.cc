#include "jit/formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::jit {

std::shared_ptr<const MappedFile> MappedFile::open(
    const std::string& path, Access access, const std::function<Error(const std::string&)>& fail) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw fail(absl::StrCat("cannot open (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw fail("cannot stat");
  }
  std::shared_ptr<MappedFile> file(new MappedFile);
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    const int protection = access == Access::kReadOnly ? PROT_READ : PROT_READ | PROT_WRITE;
    void* data = ::mmap(nullptr, file->size_, protection, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      ::close(fd);
      throw fail(absl::StrCat("cannot map the file (", std::strerror(errno), ")"));
    }
    file->data_ = data;
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace kiln::jit
