// The kernel cache with real files: round trips, corrupt, truncated, other-version and
// foreign files, several processes writing at once, and the size bound.
#include "runtime/cuda/cubin_cache.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/cuda/nvrtc_compiler.h"
#include "tests/test_util.h"

namespace kiln::runtime::cuda {
namespace {

namespace fs = std::filesystem;

class CubinCacheTest : public testing::ScratchDirTest {
 protected:
  std::string payload(size_t n, char seed) const {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 31);
    return s;
  }
  std::string read_bytes(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  void write_bytes(const std::string& path, const std::string& bytes) const {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
};

TEST_F(CubinCacheTest, CompilesOnceThenLoadsFromMemoryAndDisk) {
  const std::string key = cubin_key("__global__ void k() {}", 90, "13.0", "--std=c++17");
  const std::string cubin = payload(5000, 'a');
  int compiles = 0;
  auto compile = [&]() -> absl::StatusOr<std::string> {
    ++compiles;
    return cubin;
  };
  CubinCache first(dir_.string(), int64_t{1} << 30);
  auto r1 = first.get(key, compile);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->source, CubinCache::Source::kCompiled);
  auto r2 = first.get(key, compile);
  EXPECT_EQ(r2->source, CubinCache::Source::kMemory);
  CubinCache second(dir_.string(), int64_t{1} << 30);  // as a new process would
  auto r3 = second.get(key, compile);
  EXPECT_EQ(r3->source, CubinCache::Source::kDisk);
  EXPECT_EQ(r3->cubin, cubin);
  EXPECT_EQ(compiles, 1);
  // A different key (other arch) never reads this file.
  EXPECT_FALSE(second.read_file(cubin_key("__global__ void k() {}", 80, "13.0", "--std=c++17")));
}

TEST_F(CubinCacheTest, CorruptTruncatedOtherVersionAndForeignFilesAreIgnoredAndRebuilt) {
  const std::string key = cubin_key("src", 80, "13.0", "");
  const std::string cubin = payload(3000, 'q');
  CubinCache cache(dir_.string(), int64_t{1} << 30);
  ASSERT_TRUE(cache.write_file(key, cubin).ok());
  const std::string path = cache.path_for(key);
  const std::string good = read_bytes(path);
  ASSERT_EQ(cache.read_file(key), cubin);

  std::vector<std::pair<std::string, std::string>> bad;
  std::string flipped = good;
  flipped[flipped.size() - 10] ^= 0x40;
  bad.emplace_back("a flipped payload byte", flipped);
  bad.emplace_back("truncated", good.substr(0, good.size() - 100));
  bad.emplace_back("header only", good.substr(0, 12));
  bad.emplace_back("empty", "");
  std::string other_version = good;
  other_version[8] = 2;  // the format version's low byte
  bad.emplace_back("another format version", other_version);
  bad.emplace_back("foreign bytes", payload(4000, 'z'));
  std::string padded = good + "extra";
  bad.emplace_back("trailing bytes", padded);
  CubinCache other(dir_.string(), int64_t{1} << 30);
  ASSERT_TRUE(other.write_file(cubin_key("other source", 80, "13.0", ""), cubin).ok());
  bad.emplace_back("another key's file",
                   read_bytes(other.path_for(cubin_key("other source", 80, "13.0", ""))));

  for (const auto& [what, bytes] : bad) {
    SCOPED_TRACE(what);
    write_bytes(path, bytes);
    EXPECT_FALSE(cache.read_file(key).has_value());
    int compiles = 0;
    CubinCache fresh(dir_.string(), int64_t{1} << 30);
    auto r = fresh.get(key, [&]() -> absl::StatusOr<std::string> {
      ++compiles;
      return cubin;
    });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->source, CubinCache::Source::kCompiled);
    EXPECT_EQ(compiles, 1);
    EXPECT_EQ(cache.read_file(key), cubin);  // rebuilt on disk
  }
}

// Four processes rewrite an existing entry over and over while this one reads: every read
// sees the whole cubin — never a torn, truncated or missing file.
TEST_F(CubinCacheTest, SeveralProcessesNeverProduceATornFile) {
  const std::string key = cubin_key("shared", 90, "13.0", "");
  const std::string cubin = payload(1 << 20, 'm');
  ASSERT_TRUE(CubinCache(dir_.string(), int64_t{1} << 30).write_file(key, cubin).ok());
  std::vector<pid_t> children;
  for (int c = 0; c < 4; ++c) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      CubinCache writer(dir_.string(), int64_t{1} << 30);
      for (int i = 0; i < 20; ++i) {
        if (!writer.write_file(key, cubin).ok()) ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  CubinCache reader(dir_.string(), int64_t{1} << 30);
  int whole = 0;
  for (int i = 0; i < 200; ++i) {
    std::optional<std::string> got = reader.read_file(key);
    ASSERT_TRUE(got.has_value()) << "read " << i << " found no valid file";
    ASSERT_TRUE(*got == cubin);
    ++whole;
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(reader.read_file(key), cubin);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().extension(), ".cubin") << "a temporary file was left: " << e.path();
  }
  RecordProperty("whole_reads_during_writes", whole);
}

TEST_F(CubinCacheTest, TheDirectoryStaysUnderItsBound) {
  const int64_t bound = 100000;
  CubinCache cache(dir_.string(), bound);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        cache
            .write_file(cubin_key("k" + std::to_string(i), 90, "13.0", ""), payload(20000, 'a' + i))
            .ok());
  }
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir_)) total += static_cast<int64_t>(e.file_size());
  EXPECT_LE(total, bound);
  EXPECT_TRUE(cache.read_file(cubin_key("k19", 90, "13.0", "")).has_value());  // newest kept
}

TEST_F(CubinCacheTest, RealNvrtcCubinsRoundTrip) {
  ASSERT_TRUE(nvrtc_available().ok()) << nvrtc_available().message();
  const std::string source =
      "extern \"C\" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  const std::string key = cubin_key(source, 90, *nvrtc_version(), "--std=c++17");
  CubinCache cache(dir_.string(), int64_t{1} << 30);
  auto r = cache.get(key, [&] { return compile_to_cubin(source, "twice", 90); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->source, CubinCache::Source::kCompiled);
  EXPECT_EQ(r->cubin.substr(0, 4), std::string("\x7f"
                                               "ELF",
                                               4));  // a cubin is an ELF image
  CubinCache warm(dir_.string(), int64_t{1} << 30);
  auto again = warm.get(
      key, [] { return absl::StatusOr<std::string>(absl::InternalError("must not compile")); });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, CubinCache::Source::kDisk);
  EXPECT_EQ(again->cubin, r->cubin);
}

}  // namespace
}  // namespace kiln::runtime::cuda
