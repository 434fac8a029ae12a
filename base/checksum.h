// CRC-32 (zlib's polynomial), the checksum of Kiln's files: cache file names, cubin files,
// bundles. One helper so that every file format computes it the same way.
#ifndef KILN_BASE_CHECKSUM_H_
#define KILN_BASE_CHECKSUM_H_

#include <cstdint>
#include <string_view>

namespace kiln::base {

// The CRC-32 of `bytes`, continuing from `crc` (the CRC of what came before them; 0 to
// start), of any length.
uint32_t crc32_of(std::string_view bytes, uint32_t crc = 0);

}  // namespace kiln::base

#endif  // KILN_BASE_CHECKSUM_H_
