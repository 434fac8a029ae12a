#include "base/checksum.h"

#include <zlib.h>

#include <algorithm>

namespace kiln::base {

uint32_t crc32_of(std::string_view bytes, uint32_t crc) {
  uLong value = crc;
  for (size_t at = 0; at < bytes.size();) {  // zlib takes at most 4 GB a call
    const size_t n = std::min<size_t>(bytes.size() - at, size_t{1} << 30);
    value = crc32(value, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<uint32_t>(value);
}

}  // namespace kiln::base
