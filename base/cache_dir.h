// Where Kiln keeps what it compiles across processes: CUDA cubins (runtime/cuda/cubin_cache.h)
// and compiled CPU kernels (runtime/cpu/host_compiler.h), each in files of its own kind.
//
// What is loaded from the cache runs inside every process that uses it, so the cache is
// private to its owner: folders are made 0700 and files 0600 (0700 for libraries), and
// nothing is loaded from a folder or file that another user owns or that group or others can
// write. A file is checked through the descriptor it is then read from, so the file checked
// is the file loaded (docs/reliability.md).
#ifndef KILN_BASE_CACHE_DIR_H_
#define KILN_BASE_CACHE_DIR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::base {

// KILN_CACHE_DIR (made absolute against the working directory), else $XDG_CACHE_HOME/kiln,
// else $HOME/.cache/kiln, else the effective user's home directory from the password
// database + /.cache/kiln. Relative values of XDG_CACHE_HOME and HOME are ignored (XDG calls
// them invalid). Empty when no home directory is known: then nothing is cached on disk, rather
// than under the working directory, where whoever can write it could plant kernels.
std::string default_cache_dir();

// A cache file's name (without folder or extension) for `key`: its CRC-32 and its length,
// "0123abcd_4096". Two keys may share a name; each cache stores the key in or beside the
// file and compares it before trusting the file.
std::string cache_file_stem(const std::string& key);

// Creates `dir` and its missing parents with mode 0700; existing folders are left as they are.
absl::Status create_private_directories(const std::string& dir);

// An open file descriptor, closed when destroyed.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();

  int get() const { return fd_; }
  // Gives up ownership: the descriptor stays open.
  int release();

 private:
  int fd_;
};

// The trust rule: `root` (a cache root; a symbolic link there is followed) and each folder of
// `relative` below it (never through a symbolic link) must be owned by this process's
// effective user and writable by neither group nor others. Errors: PermissionDenied when a
// folder breaks the rule, naming it and why; NotFound when one is missing; Unavailable
// otherwise.
absl::Status check_trusted_directory(const std::string& root, const std::string& relative);

// `root`/`relative` opened read-only after the same checks on every folder on the way and on
// the file itself (a regular file, not a symbolic link), made on the descriptor returned: read
// the file through it, and no file put there after the check is what is read. Same errors.
absl::StatusOr<FileDescriptor> open_trusted_file(const std::string& root,
                                                 const std::string& relative);

// Says on stderr, once per process for each distinct line, "kiln: not loading <what>: <why>",
// and returns an error saying the same, marked so that callers need not say it again.
absl::Status refuse_to_load(const std::string& what, const absl::Status& why);

// Whether `status` came from refuse_to_load, so it is already on stderr.
bool reported_on_stderr(const absl::Status& status);

}  // namespace kiln::base

#endif  // KILN_BASE_CACHE_DIR_H_
