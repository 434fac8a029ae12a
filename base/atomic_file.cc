#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln::base {
namespace {

// Creates `tmp` afresh with `mode`: a temporary left by a crashed writer of the same name
// (pid and thread reused) is removed first, since creating over it would keep its mode.
bool create_with_mode(const std::string& tmp, mode_t mode) {
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace

absl::Status write_file_atomically(const std::string& path,
                                   const std::function<void(std::ostream&)>& write, mode_t mode) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".",
                                       std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::error_code ec;
  {
    std::ofstream out;
    if (create_with_mode(tmp, mode)) out.open(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      const int error = errno;
      std::filesystem::remove(tmp, ec);
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": cannot write (", std::strerror(error), ")"));
    }
    write(out);
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return absl::DataLossError(absl::StrCat(path, ": write failed"));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot rename into place"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::base
