#include "base/cache_dir.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/checksum.h"

namespace kiln::base {
namespace {

// The payload that marks a refusal already said on stderr.
constexpr char kReportedUrl[] = "kiln/reported-on-stderr";

// The value of environment variable `name` when it is an absolute path, else empty.
std::string absolute_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] == '/' ? value : "";
}

// The effective user's home directory from the password database; empty when it has none.
std::string password_database_home() {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<size_t>(size) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  int error = 0;
  while ((error = getpwuid_r(geteuid(), &entry, buffer.data(), buffer.size(), &found)) == ERANGE &&
         buffer.size() < (size_t{1} << 20)) {
    buffer.resize(buffer.size() * 2);
  }
  if (error != 0 || found == nullptr || found->pw_dir == nullptr) return "";
  return found->pw_dir[0] == '/' ? found->pw_dir : "";
}

std::string errno_text(int error) { return std::strerror(error); }

// Whether the file or folder `st` describes, at `path`, may be loaded from: owned by this
// process's effective user (root's files are not trusted by anyone else either: one rule) and
// not writable by group or others, who could otherwise replace what it holds.
absl::Status check_owner_and_mode(const struct stat& st, const std::string& path) {
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " is owned by uid ", st.st_uid, ", not ", geteuid()));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("group or others can write %s (mode %04o)", path, st.st_mode & 07777));
  }
  return absl::OkStatus();
}

// The error for a failed open of `path`: a symbolic link where none may be is a refusal.
absl::Status open_error(int error, const std::string& path) {
  if (error == ELOOP) return absl::PermissionDeniedError(path + " is a symbolic link");
  if (error == ENOENT) return absl::NotFoundError(path + ": no such file or folder");
  return absl::UnavailableError(absl::StrCat(path, ": ", errno_text(error)));
}

// Opens `name` in `parent` (or the path `name` when parent is AT_FDCWD) with `flags` and checks
// it through the descriptor.
absl::StatusOr<FileDescriptor> open_checked(int parent, const std::string& name, int flags,
                                            const std::string& path) {
  FileDescriptor fd(openat(parent, name.c_str(), flags | O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return open_error(errno, path);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return open_error(errno, path);
  if ((flags & O_DIRECTORY) == 0 && !S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(path + " is not a regular file");
  }
  absl::Status trusted = check_owner_and_mode(st, path);
  if (!trusted.ok()) return trusted;
  return fd;
}

// `root` and each folder of `relative` below it, checked; the last one's descriptor.
absl::StatusOr<FileDescriptor> open_trusted_directory(const std::string& root,
                                                      const std::string& relative) {
  // The root may be a symbolic link the user made (a cache on another disk): what it points
  // to is checked like any folder. Below it, every step is opened without following links.
  absl::StatusOr<FileDescriptor> dir = open_checked(AT_FDCWD, root, O_DIRECTORY, root);
  std::string path = root;
  for (absl::string_view part : absl::StrSplit(relative, '/', absl::SkipEmpty())) {
    if (!dir.ok()) break;
    absl::StrAppend(&path, "/", part);
    dir = open_checked(dir->get(), std::string(part), O_DIRECTORY | O_NOFOLLOW, path);
  }
  return dir;
}

}  // namespace

std::string default_cache_dir() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    std::error_code error;
    const std::filesystem::path absolute = std::filesystem::absolute(dir, error);
    return error ? "" : absolute.string();
  }
  if (std::string xdg = absolute_env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/kiln";
  std::string home = absolute_env("HOME");
  if (home.empty()) home = password_database_home();
  return home.empty() ? "" : home + "/.cache/kiln";
}

std::string cache_file_stem(const std::string& key) {
  return absl::StrFormat("%08x_%zu", crc32_of(key), key.size());
}

absl::Status create_private_directories(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("no cache folder");
  std::string path = dir[0] == '/' ? "" : ".";
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    absl::StrAppend(&path, "/", part);
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", errno_text(errno)));
    }
  }
  return absl::OkStatus();
}

FileDescriptor::FileDescriptor(FileDescriptor&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) close(fd_);
}

int FileDescriptor::release() { return std::exchange(fd_, -1); }

absl::Status check_trusted_directory(const std::string& root, const std::string& relative) {
  return open_trusted_directory(root, relative).status();
}

absl::StatusOr<FileDescriptor> open_trusted_file(const std::string& root,
                                                 const std::string& relative) {
  const size_t slash = relative.rfind('/');
  const std::string folder = slash == std::string::npos ? "" : relative.substr(0, slash);
  absl::StatusOr<FileDescriptor> dir = open_trusted_directory(root, folder);
  if (!dir.ok()) return dir.status();
  return open_checked(dir->get(), relative.substr(slash + 1), O_NOFOLLOW,
                      absl::StrCat(root, "/", relative));
}

absl::Status refuse_to_load(const std::string& what, const absl::Status& why) {
  const std::string line = absl::StrCat("not loading ", what, ": ", why.message());
  static std::mutex mutex;
  static auto* said = new absl::flat_hash_set<std::string>();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    first = said->insert(line).second;
  }
  if (first) std::fprintf(stderr, "kiln: %s\n", line.c_str());
  absl::Status refused = absl::PermissionDeniedError(line);
  refused.SetPayload(kReportedUrl, absl::Cord("1"));
  return refused;
}

bool reported_on_stderr(const absl::Status& status) {
  return status.GetPayload(kReportedUrl).has_value();
}

}  // namespace kiln::base
