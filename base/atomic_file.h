// Writing a file so that no reader ever sees it half-written: the bytes go to a temporary
// file in the same directory (named per process and thread), which is renamed into place.
// On any failure the temporary is removed and an existing file at `path` stays as it was.
#ifndef KILN_BASE_ATOMIC_FILE_H_
#define KILN_BASE_ATOMIC_FILE_H_

#include <sys/types.h>

#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace kiln::base {

// `write` streams the file's content; the stream's state after it decides success. `mode` is
// the file's permission bits (less the umask), given to the temporary when it is created, so
// the file never has wider ones: the kernel caches pass 0600 (base/cache_dir.h).
absl::Status write_file_atomically(const std::string& path,
                                   const std::function<void(std::ostream&)>& write,
                                   mode_t mode = 0666);

}  // namespace kiln::base

#endif  // KILN_BASE_ATOMIC_FILE_H_
