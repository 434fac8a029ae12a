#include "runtime/cache_dir.h"

#include <zlib.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::runtime {

std::string default_cache_dir() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/kiln");
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : ".", "/.cache/kiln");
}

std::string cache_file_stem(const std::string& key) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(key.data()), static_cast<uInt>(key.size()));
  return absl::StrFormat("%08x_%zu", static_cast<uint32_t>(crc), key.size());
}

}  // namespace kiln::runtime
