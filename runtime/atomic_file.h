// Writing a file so that no reader ever sees it half-written: the bytes go to a temporary
// file in the same directory (named per process and thread), which is renamed into place.
// On any failure the temporary is removed and an existing file at `path` stays as it was.
#ifndef KILN_RUNTIME_ATOMIC_FILE_H_
#define KILN_RUNTIME_ATOMIC_FILE_H_

#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace kiln::runtime {

// `write` streams the file's content; the stream's state after it decides success.
absl::Status write_file_atomically(const std::string& path,
                                   const std::function<void(std::ostream&)>& write);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_ATOMIC_FILE_H_
