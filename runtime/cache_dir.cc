#include "runtime/cache_dir.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kiln::runtime {

std::string default_cache_dir() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/kiln");
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : ".", "/.cache/kiln");
}

}  // namespace kiln::runtime
