// Compiled kernels, cached in memory and on disk, so a process compiles each kernel once
// and a warm cache directory loads it in well under a millisecond.
//
// The key is (CUDA source, arch, NVRTC version, options). On disk, in KILN_CACHE_DIR (default
// $XDG_CACHE_HOME/kiln, else ~/.cache/kiln), each cubin is one file:
//   magic "KILNCUBN" | format version (u32) | key length (u32) | key | cubin length (u64) |
//   crc32 of key and cubin (u32) | cubin
// Files are written to a temporary name and renamed into place, so readers never see a torn
// file even with several processes; a corrupt, truncated, foreign or other-version file is
// ignored (and replaced by the next compile). The directory is bounded: past its size limit
// the least recently written files are removed. The directory is made 0700 and each file 0600.
// Nothing is read from a directory or file that another user owns or that group or others can
// write (said once on stderr), and nothing is written into such a directory: its kernels are
// compiled and kept in memory only (base/cache_dir.h).
#ifndef KILN_RUNTIME_CUDA_CUBIN_CACHE_H_
#define KILN_RUNTIME_CUDA_CUBIN_CACHE_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace kiln::runtime::cuda {

inline constexpr uint32_t kCubinFormatVersion = 1;

class CubinCache {
 public:
  // `dir` empty: memory only. `max_bytes`: the bound on the directory's cubin files.
  CubinCache(std::string dir, int64_t max_bytes);

  enum class Source { kMemory, kDisk, kCompiled };
  struct Result {
    std::string cubin;
    Source source;
  };

  // The cubin for `key`, from memory, then disk, else from `compile` (stored in both, or in
  // memory alone when the directory is not trusted).
  absl::StatusOr<Result> get(const std::string& key,
                             const std::function<absl::StatusOr<std::string>()>& compile);

  // Disk layer alone (for tests and tools).
  std::optional<std::string> read_file(const std::string& key) const;
  absl::Status write_file(const std::string& key, const std::string& cubin) const;
  std::string path_for(const std::string& key) const;

 private:
  void enforce_bound() const;

  std::string dir_;
  int64_t max_bytes_;
  std::mutex mutex_;
  absl::flat_hash_map<std::string, std::string> memory_;
};

// The cache key of a kernel: source, arch, NVRTC version and options, unambiguously joined.
std::string cubin_key(const std::string& source, int arch, const std::string& nvrtc_version,
                      const std::string& options);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUBIN_CACHE_H_
