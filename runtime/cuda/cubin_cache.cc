#include "runtime/cuda/cubin_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/cache_dir.h"
#include "base/checksum.h"

namespace kiln::runtime::cuda {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'U', 'B', 'N'};
constexpr size_t kHeaderFixed = 8 + 4 + 4;  // magic, version, key length

uint32_t checksum(const std::string& key, const std::string& cubin) {
  return base::crc32_of(cubin, base::crc32_of(key));
}

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// The whole content of the open file `fd`; nullopt on a read error.
std::optional<std::string> read_all(int fd) {
  std::string data;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got == 0) return data;
    if (got < 0 && errno != EINTR) return std::nullopt;
    if (got > 0) data.append(chunk, static_cast<size_t>(got));
  }
}

template <class T>
bool take(const std::string& in, size_t& pos, T& value) {
  if (in.size() - pos < sizeof value || pos > in.size()) return false;
  std::memcpy(&value, in.data() + pos, sizeof value);
  pos += sizeof value;
  return true;
}

}  // namespace

CubinCache::CubinCache(std::string dir, int64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::string CubinCache::path_for(const std::string& key) const {
  // File names come from a stable checksum of the key; the key inside the file decides.
  return absl::StrCat(dir_, "/", base::cache_file_stem(key), ".cubin");
}

std::optional<std::string> CubinCache::read_file(const std::string& key) const {
  if (dir_.empty()) return std::nullopt;
  // A folder someone else can write is refused as a whole, said once for all its files.
  if (absl::Status trusted = base::check_trusted_directory(dir_, ""); !trusted.ok()) {
    if (absl::IsPermissionDenied(trusted))
      (void)base::refuse_to_load("cubins from " + dir_, trusted);
    return std::nullopt;
  }
  const std::string path = path_for(key);
  absl::StatusOr<base::FileDescriptor> file =
      base::open_trusted_file(dir_, path.substr(dir_.size() + 1));
  if (!file.ok()) {
    if (absl::IsPermissionDenied(file.status())) (void)base::refuse_to_load(path, file.status());
    return std::nullopt;
  }
  std::optional<std::string> bytes = read_all(file->get());  // the file that was checked
  if (!bytes) return std::nullopt;
  const std::string& data = *bytes;
  size_t pos = 0;
  if (data.size() < kHeaderFixed || std::memcmp(data.data(), kMagic, 8) != 0) return std::nullopt;
  pos = 8;
  uint32_t version = 0, key_length = 0;
  if (!take(data, pos, version) || version != kCubinFormatVersion) return std::nullopt;
  if (!take(data, pos, key_length) || data.size() - pos < key_length) return std::nullopt;
  if (data.compare(pos, key_length, key) != 0 || key_length != key.size()) return std::nullopt;
  pos += key_length;
  uint64_t cubin_length = 0;
  uint32_t crc = 0;
  if (!take(data, pos, cubin_length) || !take(data, pos, crc)) return std::nullopt;
  if (data.size() - pos != cubin_length) return std::nullopt;  // truncated or padded
  std::string cubin = data.substr(pos);
  if (checksum(key, cubin) != crc) return std::nullopt;
  return cubin;
}

absl::Status CubinCache::write_file(const std::string& key, const std::string& cubin) const {
  if (dir_.empty()) return absl::OkStatus();
  if (absl::Status made = base::create_private_directories(dir_); !made.ok()) return made;
  // Nothing is stored where it would not be read back: the cubin stays in memory.
  if (absl::Status trusted = base::check_trusted_directory(dir_, ""); !trusted.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("not storing cubins in ", dir_, ": ", trusted.message()));
  }
  std::string data(kMagic, 8);
  put(data, kCubinFormatVersion);
  put(data, static_cast<uint32_t>(key.size()));
  data += key;
  put(data, static_cast<uint64_t>(cubin.size()));
  put(data, checksum(key, cubin));
  data += cubin;
  absl::Status written = base::write_file_atomically(
      path_for(key),
      [&](std::ostream& out) { out.write(data.data(), static_cast<std::streamsize>(data.size())); },
      0600);
  if (!written.ok()) return written;
  enforce_bound();
  return absl::OkStatus();
}

void CubinCache::enforce_bound() const {
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().extension() != ".cubin") continue;
    const auto size = e.file_size(ec);
    if (ec) continue;
    total += static_cast<int64_t>(size);
    files.emplace_back(e.last_write_time(ec), e.path());
  }
  if (total <= max_bytes_) return;
  std::sort(files.begin(), files.end());  // oldest first
  for (const auto& [time, path] : files) {
    if (total <= max_bytes_) break;
    const auto size = fs::file_size(path, ec);
    if (!ec && fs::remove(path, ec)) total -= static_cast<int64_t>(size);
  }
}

absl::StatusOr<CubinCache::Result> CubinCache::get(
    const std::string& key, const std::function<absl::StatusOr<std::string>()>& compile) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end())
      return Result{it->second, Source::kMemory};
  }
  Result result;
  if (std::optional<std::string> cubin = read_file(key)) {
    result = {*std::move(cubin), Source::kDisk};
  } else {
    absl::StatusOr<std::string> compiled = compile();
    if (!compiled.ok()) return compiled.status();
    result = {*std::move(compiled), Source::kCompiled};
    (void)write_file(key, result.cubin);  // a read-only cache directory only costs speed
  }
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.emplace(key, result.cubin);
  return result;
}

std::string cubin_key(const std::string& source, int arch, const std::string& nvrtc_version,
                      const std::string& options) {
  return absl::StrCat("arch=sm_", arch, "\nnvrtc=", nvrtc_version, "\noptions=", options,
                      "\nsource_bytes=", source.size(), "\n", source);
}

}  // namespace kiln::runtime::cuda
