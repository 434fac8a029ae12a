// The on-disk kernel cache is private (base/cache_dir.h): what Kiln creates there is 0700
// (folders, libraries) or 0600 (other files), and a library or cubin planted where another
// user could have put it is never loaded: a compiled CPU kernel then runs on the tile
// evaluator with the same results, a cubin is compiled again and kept in memory. The cache
// folder never falls back to one under the working directory.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/cache_dir.h"
#include "gtest/gtest.h"
#include "kiln/kiln.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cuda/cubin_cache.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
namespace cpu = runtime::cpu;
using runtime::cuda::CubinCache;

constexpr char kChildVariable[] = "KILN_CACHE_SECURITY_CHILD";
constexpr char kChildTest[] = "CacheSecurityChild.RunsThePlantableKernel";
constexpr int64_t kElements = 4099;

mode_t mode_of(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// How many lines of `output` start with "kiln: not loading".
int refusal_lines(const std::string& output) {
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, "kiln: not loading")) ++lines;
  }
  return lines;
}

float input_at(int64_t i) { return static_cast<float>(i % 97) * 0.03125f - 1.5f; }

// The kernel the planted-library tests replace, run by them in a fresh process (the host
// compiler loads a library once per process) with the cache they prepared. On its own it
// runs against the default cache. It prints how many launches ran a compiled loop and
// checks every value.
TEST(CacheSecurityChild, RunsThePlantableKernel) {
  // Small as it is, the kernel compiles to a loop in the child (the default waits for more
  // elements); a test process keeps the default.
  if (std::getenv(kChildVariable) != nullptr) cpu::set_compiled_pointwise_min_elements(0);
  std::vector<float> x(kElements);
  for (int64_t i = 0; i < kElements; ++i) x[i] = input_at(i);
  const int64_t before = cpu::compiled_pointwise_runs();
  const Tensor t = Tensor::from_vector(x, {kElements});
  const std::vector<float> got = (sigmoid(abs(t - 0.375)) * 1.5 - square(t)).to_vector<float>();
  std::printf("compiled runs: %lld\n",
              static_cast<long long>(cpu::compiled_pointwise_runs() - before));
  for (int64_t i = 0; i < kElements; ++i) {
    const double a = x[i];
    const double want = 1.5 / (1 + std::exp(-std::fabs(a - 0.375))) - a * a;
    ASSERT_NEAR(got[i], want, 1e-5 * std::max(1.0, std::fabs(want))) << "at " << i;
  }
}

// What a fresh process printed when it ran the kernel with `cache` as its cache folder.
testing::Result run_child(const fs::path& cache) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  return testing::run(
      absl::StrCat(kChildVariable, "=1 KILN_DEVICE=cpu KILN_CPU_JIT=sync KILN_CACHE_DIR='",
                   cache.string(), "' '", self.string(), "' --gtest_filter=", kChildTest));
}

bool compiled_in(const testing::Result& run, int runs) {
  return run.output.find(absl::StrCat("compiled runs: ", runs, "\n")) != std::string::npos;
}

// The suite's shared files: a cache a fresh process made from nothing for the kernel above,
// and a library whose constructor writes a marker file, to plant in its place.
class PlantedLibraryTest : public testing::ScratchDirTest {
 protected:
  static void SetUpTestSuite() {
    if (!cpu::host_compiler_enabled()) return;
    suite_ = fs::temp_directory_path() / absl::StrCat("kiln_cache_security_", ::getpid());
    fs::remove_all(suite_);
    fs::create_directories(suite_);
    fresh_ = new testing::Result(run_child(fresh_cache()));
    const std::string source = (suite_ / "planted.cc").string();
    std::ofstream(source) << "#include <cstdio>\n"
                          << "__attribute__((constructor)) static void planted() {\n"
                          << "  if (FILE* f = std::fopen(\"" << marker().string()
                          << "\", \"w\")) std::fclose(f);\n}\n";
    const char* cxx = std::getenv("KILN_CXX");
    planted_build_ = new testing::Result(
        testing::run(absl::StrCat(cxx != nullptr && *cxx != '\0' ? cxx : "c++",
                                  " -shared -fPIC -o '", planted().string(), "' '", source, "'")));
  }
  static void TearDownTestSuite() {
    if (!suite_.empty()) fs::remove_all(suite_);
    delete fresh_;
    delete planted_build_;
    fresh_ = planted_build_ = nullptr;
  }

  static fs::path fresh_cache() { return suite_ / "fresh" / "kiln"; }
  static fs::path planted() { return suite_ / "planted.so"; }
  static fs::path marker() { return suite_ / "planted-code-ran"; }

  void SetUp() override {
    testing::ScratchDirTest::SetUp();
    if (!cpu::host_compiler_enabled()) GTEST_SKIP() << "compiled CPU kernels are off";
    ASSERT_EQ(fresh_->exit_code, 0) << fresh_->output;
    ASSERT_TRUE(compiled_in(*fresh_, 1)) << fresh_->output;
    ASSERT_EQ(planted_build_->exit_code, 0) << planted_build_->output;
  }

  // The kernel's library in the fresh cache (the one .so that is not the prelude's).
  static fs::path kernel_library(const fs::path& cpu_dir) {
    for (const auto& entry : fs::directory_iterator(cpu_dir)) {
      if (entry.path().extension() == ".so") return entry.path();
    }
    return {};
  }

  // A private cache in the scratch folder holding the planted library under the kernel's
  // name, beside the kernel's genuine key: loading it would run the planted constructor.
  fs::path plant() {
    fs::path cache = dir_ / "kiln";
    const fs::path from = fresh_cache() / "cpu", to = cache / "cpu";
    fs::create_directories(to);
    fs::permissions(cache, fs::perms::owner_all);
    fs::permissions(to, fs::perms::owner_all);
    const fs::path library = kernel_library(from);
    fs::copy_file(planted(), to / library.filename());
    fs::permissions(to / library.filename(), fs::perms::owner_all);
    const fs::path key = fs::path(library).replace_extension(".key");
    fs::copy_file(key, to / key.filename());
    return cache;
  }

  // Runs the kernel over `cache`, which holds the planted library: the planted code must not
  // run, the values must be right (the child checks them) through the evaluator, and one
  // line must say what was refused.
  void expect_not_loaded(const fs::path& cache, const std::string& refused) {
    fs::remove(marker());
    const testing::Result run = run_child(cache);
    EXPECT_FALSE(fs::exists(marker())) << "the planted library was loaded";
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(compiled_in(run, 0)) << run.output;
    EXPECT_EQ(refusal_lines(run.output), 1) << run.output;
    EXPECT_NE(run.output.find(refused), std::string::npos) << run.output;
  }

  // The planted library is loaded from a private cache: the test can see a load.
  void expect_loaded_while_trusted(const fs::path& cache) {
    fs::remove(marker());
    const testing::Result run = run_child(cache);
    ASSERT_TRUE(fs::exists(marker())) << "a trusted cache's library was not loaded\n" << run.output;
    fs::remove(marker());
  }

  static inline fs::path suite_;
  static inline testing::Result* fresh_ = nullptr;
  static inline testing::Result* planted_build_ = nullptr;
};

// Everything a fresh cache holds after one compiled kernel: only its owner can read or
// change it.
TEST_F(PlantedLibraryTest, AFreshCacheIsPrivateToItsOwner) {
  EXPECT_EQ(mode_of(fresh_cache().parent_path()), 0700u);
  EXPECT_EQ(mode_of(fresh_cache()), 0700u);
  EXPECT_EQ(mode_of(fresh_cache() / "cpu"), 0700u);
  int libraries = 0, files = 0;
  for (const auto& entry : fs::directory_iterator(fresh_cache() / "cpu")) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << "a temporary was left: " << name;
    if (entry.path().extension() == ".so") {
      ++libraries;
      EXPECT_EQ(mode_of(entry.path()), 0700u) << name;
    } else {
      ++files;
      EXPECT_EQ(mode_of(entry.path()), 0600u) << name;
    }
  }
  EXPECT_EQ(libraries, 1);
  EXPECT_GE(files, 3);  // the source, the key, the prelude (and its precompiled form)
}

TEST_F(PlantedLibraryTest, ALibraryWhereOthersCanWriteIsNotLoaded) {
  const fs::path cache = plant();
  ASSERT_NO_FATAL_FAILURE(expect_loaded_while_trusted(cache));
  const fs::path cpu_dir = cache / "cpu", library = kernel_library(cpu_dir);
  {
    SCOPED_TRACE("cpu/ writable by the group");
    ::chmod(cpu_dir.c_str(), 0770);
    expect_not_loaded(cache, "group or others can write " + cpu_dir.string());
    ::chmod(cpu_dir.c_str(), 0700);
  }
  {
    SCOPED_TRACE("the cache root writable by others");
    ::chmod(cache.c_str(), 0703);
    expect_not_loaded(cache, "group or others can write " + cache.string() + " ");
    ::chmod(cache.c_str(), 0700);
  }
  {
    SCOPED_TRACE("the library writable by the group");
    ::chmod(library.c_str(), 0770);
    expect_not_loaded(cache, "not loading " + library.string());
    ::chmod(library.c_str(), 0700);
  }
}

TEST_F(PlantedLibraryTest, ALibraryOwnedByAnotherUserIsNotLoaded) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  const fs::path cache = plant();
  ASSERT_NO_FATAL_FAILURE(expect_loaded_while_trusted(cache));
  const fs::path cpu_dir = cache / "cpu", library = kernel_library(cpu_dir);
  {
    SCOPED_TRACE("the library owned by uid 65534");
    ASSERT_EQ(::chown(library.c_str(), 65534, 65534), 0);
    expect_not_loaded(cache, library.string() + " is owned by uid 65534, not 0");
    ASSERT_EQ(::chown(library.c_str(), 0, 0), 0);
  }
  {
    SCOPED_TRACE("cpu/ owned by uid 65534");
    ASSERT_EQ(::chown(cpu_dir.c_str(), 65534, 65534), 0);
    expect_not_loaded(cache, cpu_dir.string() + " is owned by uid 65534, not 0");
    ASSERT_EQ(::chown(cpu_dir.c_str(), 0, 0), 0);
  }
}

// A symbolic link in the cache is never followed, even to a file its owner could load.
TEST_F(PlantedLibraryTest, ASymbolicLinkInTheCacheIsNotFollowed) {
  const fs::path cache = plant();
  const fs::path library = kernel_library(cache / "cpu");
  fs::rename(library, dir_ / "elsewhere.so");
  fs::create_symlink(dir_ / "elsewhere.so", library);
  expect_not_loaded(cache, library.string() + " is a symbolic link");
}

class CubinCacheSecurityTest : public testing::ScratchDirTest {
 protected:
  // Writes `planted_` as the disk file for `key_` in `dir` (read back while trusted); its path.
  std::string plant(const fs::path& dir) {
    CubinCache cache(dir.string(), int64_t{1} << 30);
    EXPECT_TRUE(cache.write_file(key_, planted_).ok());
    EXPECT_EQ(CubinCache(dir.string(), int64_t{1} << 30).read_file(key_), planted_);
    return cache.path_for(key_);
  }
  absl::StatusOr<std::string> compile() {
    ++compiles_;
    return compiled_;
  }
  std::string bytes_of(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // A fresh cache over `dir` must miss, compile once, keep the cubin in memory, and say so in
  // one line naming `refused`. A refused folder is left as it was; a refused file in a trusted
  // folder is replaced by the compiled cubin, private.
  void expect_not_loaded(const fs::path& dir, const std::string& refused, bool folder_refused) {
    ::testing::internal::CaptureStderr();
    CubinCache cache(dir.string(), int64_t{1} << 30);
    EXPECT_FALSE(cache.read_file(key_).has_value());
    compiles_ = 0;
    auto first = cache.get(key_, [&] { return compile(); });
    auto second = cache.get(key_, [&] { return compile(); });
    const std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(first->source, CubinCache::Source::kCompiled);
    EXPECT_EQ(first->cubin, compiled_);
    EXPECT_EQ(second->source, CubinCache::Source::kMemory);
    EXPECT_EQ(compiles_, 1);
    EXPECT_EQ(refusal_lines(said), 1) << said;
    EXPECT_NE(said.find(refused), std::string::npos) << said;
    const std::string path = cache.path_for(key_);
    if (folder_refused) {
      EXPECT_NE(bytes_of(path).find(planted_), std::string::npos) << "stored where it is refused";
    } else {
      EXPECT_EQ(mode_of(path), 0600u);
      EXPECT_EQ(CubinCache(dir.string(), int64_t{1} << 30).read_file(key_), compiled_);
    }
  }

  const std::string key_ = runtime::cuda::cubin_key("__global__ void k() {}", 90, "13.0", "");
  const std::string planted_ = "planted cubin bytes";
  const std::string compiled_ = "freshly compiled cubin";
  int compiles_ = 0;
};

TEST_F(CubinCacheSecurityTest, AFreshCacheIsPrivateToItsOwner) {
  const fs::path dir = dir_ / "new" / "kiln";
  const std::string path = plant(dir);
  EXPECT_EQ(mode_of(dir_ / "new"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(path), 0600u);
}

TEST_F(CubinCacheSecurityTest, ACubinWhereOthersCanWriteIsNotLoaded) {
  const fs::path dir = dir_ / "kiln";
  const std::string path = plant(dir);
  {
    SCOPED_TRACE("the folder writable by the group");
    ::chmod(dir.c_str(), 0770);
    expect_not_loaded(dir, "not loading cubins from " + dir.string(), true);
    ::chmod(dir.c_str(), 0700);
  }
  {
    SCOPED_TRACE("the file writable by others");
    ::chmod(path.c_str(), 0606);
    expect_not_loaded(dir, "not loading " + path + ": group or others can write", false);
  }
}

TEST_F(CubinCacheSecurityTest, ACubinOwnedByAnotherUserIsNotLoaded) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  const fs::path dir = dir_ / "kiln";
  {
    SCOPED_TRACE("the file owned by uid 65534");
    const std::string path = plant(dir);
    ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
    expect_not_loaded(dir, path + " is owned by uid 65534, not 0", false);
  }
  {
    SCOPED_TRACE("the folder owned by uid 65534");
    plant(dir);
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    expect_not_loaded(dir, dir.string() + " is owned by uid 65534, not 0", true);
    ASSERT_EQ(::chown(dir.c_str(), 0, 0), 0);
  }
}

// The cache folder with KILN_CACHE_DIR, XDG_CACHE_HOME and HOME set to `kiln`, `xdg` and
// `home` (nullptr: unset).
std::string cache_dir_with(const char* kiln, const char* xdg, const char* home) {
  testing::ScopedEnv a("KILN_CACHE_DIR", ""), b("XDG_CACHE_HOME", ""), c("HOME", "");
  auto set = [](const char* name, const char* value) {
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  };
  set("KILN_CACHE_DIR", kiln);
  set("XDG_CACHE_HOME", xdg);
  set("HOME", home);
  return base::default_cache_dir();
}

TEST(CacheDir, WithNothingSetTheCacheIsNeverUnderTheWorkingDirectory) {
  const std::string dir = cache_dir_with(nullptr, nullptr, nullptr);
  EXPECT_TRUE(dir.empty() || dir[0] == '/') << dir;
  EXPECT_EQ(dir.find("./"), std::string::npos) << dir;
  if (::geteuid() == 0 && fs::is_directory("/root")) EXPECT_EQ(dir, "/root/.cache/kiln");
  EXPECT_EQ(cache_dir_with("", "", ""), dir);  // empty is unset
}

TEST(CacheDir, RelativeXdgCacheHomeAndHomeAreIgnored) {
  const std::string fallback = cache_dir_with(nullptr, nullptr, nullptr);
  EXPECT_EQ(cache_dir_with(nullptr, "relative/xdg", "relative/home"), fallback);
  EXPECT_EQ(cache_dir_with(nullptr, "relative/xdg", "/home/someone"), "/home/someone/.cache/kiln");
  EXPECT_EQ(cache_dir_with(nullptr, "/xdg", "/home/someone"), "/xdg/kiln");
}

TEST(CacheDir, ARelativeKilnCacheDirIsMadeAbsolute) {
  EXPECT_EQ(cache_dir_with("relative/cache", "/xdg", "/home/someone"),
            (fs::current_path() / "relative/cache").string());
  EXPECT_EQ(cache_dir_with("/abs/cache", nullptr, nullptr), "/abs/cache");
}

}  // namespace
}  // namespace kiln
