// No launch waits for the C++ compiler (runtime/cpu/compiled_kernel_cache.h): a kernel's
// first launches run on the tile evaluator while its loop compiles on a background thread,
// later launches take the loop once it is loaded, and a compiler that is slow, fails, hangs
// or is still running when the process exits costs speed and one line on stderr, never a
// result or a half-written file. Each test names its own compiler (a script in its scratch
// folder, so that no library cached earlier matches) and its own cache folder.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kiln/kiln.h"
#include "runtime/cpu/compiled_kernel_cache.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/host_compiler.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace cpu = runtime::cpu;
namespace fs = std::filesystem;

// A pointwise chain over `x`, different for each `variant` so that each test's kernel is one
// no other test has compiled in this process.
Tensor chain(const Tensor& x, int variant) {
  switch (variant) {
    case 0:
      return tanh(x) * sigmoid(x) + square(abs(x));
    case 1:
      return exp(-square(x)) * relu(x) - tanh(abs(x));
    case 2:
      return sigmoid(square(x)) - abs(tanh(x)) * x;
    case 3:
      return relu(tanh(x) - square(sigmoid(x)));
    case 5:
      return square(tanh(x)) * sigmoid(-x);
    default:
      return abs(exp(tanh(x)) - sigmoid(x)) * square(x);
  }
}

// Whether a and b hold the same bits, NaN matching NaN.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::isnan(a[i]) && std::isnan(b[i])) &&
        std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) {
      return false;
    }
  }
  return true;
}

class BackgroundCompileTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    if (!cpu::host_compiler_enabled() || default_device().type != DeviceType::CPU) {
      GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0) or the device is not the CPU";
    }
    cpu::set_host_compile_mode(cpu::HostCompileMode::kBackground);
    cpu::set_compiled_pointwise_min_elements(0);
    std::mt19937_64 rng(testing::test_seed());
    x_ = testing::random_floats(20'011, rng, -6, 6);
  }
  void TearDown() override {
    cpu::wait_for_background_compiles();  // nothing of this test's outlives it
    cpu::set_compiled_pointwise_min_elements(-1);
    cpu::set_host_compile_mode(std::nullopt);
    ScratchDirTest::TearDown();
  }

  // A compiler named `name` in the scratch folder (or `folder`): a shell script with `body`.
  std::string compiler(const std::string& name, const std::string& body) {
    return compiler(dir_, name, body);
  }
  static std::string compiler(const fs::path& folder, const std::string& name,
                              const std::string& body) {
    const fs::path script = folder / name;
    std::ofstream(script) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }

  // chain(x, variant) once, and whether that launch ran the compiled loop.
  std::vector<float> launch(int variant, bool* compiled = nullptr) {
    const std::vector<float> got =
        chain(Tensor::from_vector(x_, {20'011}), variant).to_vector<float>();
    if (compiled != nullptr) *compiled = cpu::last_kernel_ran_compiled_loop();
    return got;
  }

  // What the tile evaluator computes for chain(x, variant).
  std::vector<float> evaluated(int variant) {
    cpu::set_compiled_pointwise_min_elements(std::numeric_limits<int64_t>::max());
    std::vector<float> got = launch(variant);
    cpu::set_compiled_pointwise_min_elements(0);
    return got;
  }

  std::vector<float> x_;
};

// A compiler that does not finish until the test lets it (it waits for a file; the timeout,
// 20 s, would stop it otherwise): three launches of a kernel each run on the evaluator, with
// its bits, the second queueing the compile, and another kernel's first launch, which looks
// in the disk cache while the compile runs, does not wait for it either. A launch that
// waited would take the timeout, twice the bound.
TEST_F(BackgroundCompileTest, LaunchesDoNotWaitForASlowCompiler) {
  const fs::path go = dir_ / "go";
  testing::ScopedEnv cache("KILN_CACHE_DIR", (dir_ / "cache").c_str());
  testing::ScopedEnv cxx("KILN_CXX", compiler("slow-c++", "while [ ! -e " + go.string() +
                                                              " ]; do sleep 0.05; done\nexit 1")
                                         .c_str());
  testing::ScopedEnv timeout("KILN_CPU_JIT_TIMEOUT", "20");
  const std::vector<float> want = evaluated(0), want_other = evaluated(5);
  const int64_t queued = cpu::background_compiles_queued();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    bool compiled = true;
    EXPECT_TRUE(same_bits(launch(0, &compiled), want)) << "launch " << i;
    EXPECT_FALSE(compiled) << "launch " << i;
    if (i == 0) {
      EXPECT_EQ(cpu::background_compiles_queued(), queued) << "a first launch queues none";
    }
  }
  EXPECT_TRUE(same_bits(launch(5), want_other));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(cpu::background_compiles_queued(), queued + 1);
  // The evaluator takes milliseconds here. A generous bound, for a shared machine: what is
  // checked is that no launch waited for the compiler.
  EXPECT_LT(seconds, 10.0);
  std::ofstream(go) << "go\n";
  cpu::wait_for_background_compiles();  // before the environment it reads is restored
}

// A compiler that runs past KILN_CPU_JIT_TIMEOUT is stopped: the evaluator keeps the kernel,
// and stderr gets one line naming the timeout, however many launches and kernels follow.
TEST_F(BackgroundCompileTest, AHangingCompilerIsStoppedWithOneLine) {
  testing::ScopedEnv cache("KILN_CACHE_DIR", (dir_ / "cache").c_str());
  testing::ScopedEnv cxx("KILN_CXX", compiler("hanging-c++", "exec sleep 600").c_str());
  testing::ScopedEnv timeout("KILN_CPU_JIT_TIMEOUT", "1");
  const std::vector<float> want = evaluated(1), want_other = evaluated(2);
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(launch(1), want));
  cpu::wait_for_background_compiles();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(launch(2), want_other));
  cpu::wait_for_background_compiles();
  bool compiled = true;
  EXPECT_TRUE(same_bits(launch(1, &compiled), want));
  EXPECT_FALSE(compiled);
  const std::string said = ::testing::internal::GetCapturedStderr();
  // Each kernel's compile (and the prelude's precompile before the first) gave up after 1 s.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60);
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  EXPECT_NE(said.find("KILN_CPU_JIT_TIMEOUT"), std::string::npos) << said;
  EXPECT_NE(said.find("hanging-c++"), std::string::npos) << said;
  EXPECT_NE(said.find("the tile evaluator runs such kernels instead"), std::string::npos) << said;
}

// A compiler that fails: the same, with its exit status in the one line.
TEST_F(BackgroundCompileTest, AFailingCompilerLeavesTheEvaluatorWithOneLine) {
  testing::ScopedEnv cache("KILN_CACHE_DIR", (dir_ / "cache").c_str());
  testing::ScopedEnv cxx("KILN_CXX",
                         compiler("failing-c++", "echo no such luck >&2\nexit 3").c_str());
  const std::vector<float> want = evaluated(3);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(launch(3), want));
  cpu::wait_for_background_compiles();
  bool compiled = true;
  EXPECT_TRUE(same_bits(launch(3, &compiled), want));
  EXPECT_FALSE(compiled);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 2) << said;  // the line, and its output
  EXPECT_NE(said.find("failing-c++"), std::string::npos) << said;
  EXPECT_NE(said.find("exited with status 3"), std::string::npos) << said;
  EXPECT_NE(said.find("no such luck"), std::string::npos) << said;
}

// With a working compiler: the first launch finds no library and runs the evaluator, the
// second queues the compile, and once it is done the next launch runs the loop, with the
// evaluator's bits.
TEST_F(BackgroundCompileTest, TheLoopIsUsedOnceReady) {
  testing::ScopedEnv cache("KILN_CACHE_DIR", (dir_ / "cache").c_str());
  testing::ScopedEnv cxx("KILN_CXX", compiler("working-c++", "exec c++ \"$@\"").c_str());
  const std::vector<float> want = evaluated(4);
  bool compiled = true;
  EXPECT_TRUE(same_bits(launch(4, &compiled), want));
  EXPECT_FALSE(compiled) << "the first launch found a library in a fresh cache";
  const int64_t queued = cpu::background_compiles_queued();
  EXPECT_TRUE(same_bits(launch(4, &compiled), want));
  EXPECT_EQ(cpu::background_compiles_queued(), queued + 1);
  cpu::wait_for_background_compiles();
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(same_bits(launch(4, &compiled), want));
    EXPECT_TRUE(compiled) << "launch " << i << " after the compile";
  }
  int libraries = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_ / "cache" / "cpu")) {
    libraries += e.path().extension() == ".so";
  }
  EXPECT_EQ(libraries, 1);
}

// A process that exits while its compiler runs (here one that has written part of its
// output and then sleeps) kills the compiler, starts no other, and leaves no library,
// half-written or whole, in the cache: at most the kernel's source.
TEST_F(BackgroundCompileTest, ExitingDuringACompileLeavesNoHalfWrittenLibrary) {
  // The death test's child runs this test again in a fresh process, with a scratch folder of
  // its own: it takes the parent's from the environment.
  const char* parent = std::getenv("KILN_TEST_EXITING_DIR");
  const fs::path base = parent != nullptr ? fs::path(parent) : dir_;
  testing::ScopedEnv base_env("KILN_TEST_EXITING_DIR", base.c_str());
  const fs::path cache = base / "cache", pid_file = base / "compiler.pid";
  const std::string cxx =
      compiler(base, "partial-c++",
               "out=\"\"\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=\"$2\"; shift; done\n"
               "echo half a library > \"$out\"\necho $$ > " +
                   pid_file.string() + "\nexec sleep 600");
  testing::ScopedEnv cache_env("KILN_CACHE_DIR", cache.c_str());
  testing::ScopedEnv cxx_env("KILN_CXX", cxx.c_str());
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // Registered before Kiln's own exit handler, so run after it: an exit that takes a
        // while gives the background thread time to start its next compile, which must not
        // happen once the handler has run.
        std::atexit([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
        launch(0);
        launch(0);  // queues the compile
        for (int i = 0; i < 1000 && !fs::exists(pid_file); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        const bool started = fs::exists(pid_file);
        if (dir_ != base) fs::remove_all(dir_);  // the child's own scratch folder
        std::exit(started ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  ASSERT_TRUE(fs::exists(pid_file));
  int compiler_pid = 0;
  std::ifstream(pid_file) >> compiler_pid;
  ASSERT_GT(compiler_pid, 0);
  EXPECT_NE(::kill(compiler_pid, 0), 0) << "the compiler outlived the process";
  std::vector<std::string> left;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(cache)) {
    if (e.is_regular_file() && e.path().extension() != ".cc" && e.path().extension() != ".h") {
      left.push_back(e.path().filename().string());
    }
  }
  EXPECT_TRUE(left.empty()) << "left in the cache: " << absl::StrJoin(left, ", ");
}

}  // namespace
}  // namespace kiln
