#include "runtime/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln::runtime {

absl::Status write_file_atomically(const std::string& path,
                                   const std::function<void(std::ostream&)>& write) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".",
                                       std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": cannot write (", std::strerror(errno), ")"));
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

}  // namespace kiln::runtime
