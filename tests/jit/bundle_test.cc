// Bundles (save_compiled, load_compiled, `kiln bundle`): a loaded bundle replays every saved
// signature with the bits the recording function computes, without planning or generating a
// kernel; a signature it lacks goes to the fallback or is a clear error; a bundle that is
// corrupt, truncated, of another version or not a bundle at all is refused by name and
// leaves everything as it was. (A fresh process with an empty cache loading a bundle of
// all-MiniLM-L6-v2 is tests/samples/samples_test.cc's BundledEmbeddings test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/checksum.h"
#include "jit/eval/compiled_bundle.h"
#include "jit/formats/plan_format.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "jit/graph/node.h"
#include "kiln/kiln.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/host_compiler.h"
#include "tests/cuda/kernel_corpus.h"
#include "tests/random_program.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::random_floats;

Tensor random_tensor(std::vector<int64_t> shape, std::mt19937_64& rng) {
  return Tensor::from_vector(random_floats(testing::count(shape), rng), shape);
}

// Every element's bits, NaN matching NaN.
void expect_same_bits(const Tensor& want, const Tensor& got) {
  ASSERT_EQ(want.shape(), got.shape());
  ASSERT_EQ(want.dtype(), got.dtype());
  const std::vector<float> w = want.astype(DType::F32).to_vector<float>();
  const std::vector<float> g = got.astype(DType::F32).to_vector<float>();
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    ASSERT_EQ(std::bit_cast<uint32_t>(w[i]), std::bit_cast<uint32_t>(g[i])) << "element " << i;
  }
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A small model with captured weights, a captured scalar, a softmax row kernel, a reduction,
// and outputs that are a plan output, an argument and a captured tensor.
struct Model {
  Tensor w1, b1, w2, table;
  explicit Model(std::mt19937_64& rng)
      : w1(random_tensor({12, 24}, rng)),
        b1(random_tensor({24}, rng)),
        w2(random_tensor({24, 5}, rng)),
        table(random_tensor({3, 5}, rng).eval()) {}
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    const Tensor h = gelu(matmul(in[0], w1) + b1) * 0.75;
    return {log_softmax(matmul(h, w2), -1), sum(square(h), {1}), in[1], table};
  }
};

class BundleTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    rng_.seed(testing::test_seed());
  }
  std::vector<Tensor> inputs(int64_t rows) {
    return {random_tensor({rows, 12}, rng_), random_tensor({2, 2}, rng_)};
  }
  // `model` compiled and called at 4 and 7 rows, then saved to bundle/.
  Compiled saved(const Model& model) {
    Compiled f = compile([&model](const std::vector<Tensor>& in) { return model(in); });
    f(inputs(4));
    f(inputs(7));
    save_compiled(f, path("bundle"));
    return f;
  }

  std::mt19937_64 rng_;
};

TEST_F(BundleTest, LoadedBundleReplaysEverySignatureWithoutPlanningOrGenerating) {
  const Model model(rng_);
  saved(model);
  std::vector<std::vector<Tensor>> in, got;
  for (int64_t rows : {7, 4, 7}) in.push_back(inputs(rows));
  eval(in[0]), eval(in[1]), eval(in[2]);
  const Stats before = stats();
  Compiled loaded = load_compiled(path("bundle"));
  EXPECT_EQ(loaded.num_signatures(), 2u);
  for (const std::vector<Tensor>& call : in) got.push_back(loaded(call));
  const Stats after = stats();
  EXPECT_EQ(after.plans_built - before.plans_built, 0);
  EXPECT_EQ(after.kernels_compiled - before.kernels_compiled, 0);
  EXPECT_EQ(after.compiled_records - before.compiled_records, 0);
  EXPECT_EQ(after.compiled_replays - before.compiled_replays, 3);
  for (size_t c = 0; c < in.size(); ++c) {  // against the function run eagerly
    const std::vector<Tensor> want = model(in[c]);
    ASSERT_EQ(got[c].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) expect_same_bits(want[i], got[c][i]);
  }
}

TEST_F(BundleTest, TheBundleHoldsTheCapturedWeightsNotReferencesToThem) {
  std::vector<Tensor> want;
  const std::vector<Tensor> in = inputs(4);
  {
    const Model model(rng_);
    saved(model);
    want = model(in);
    eval(want);
  }  // the model and its compiled function are gone
  const std::vector<Tensor> got = load_compiled(path("bundle"))(in);
  for (size_t i = 0; i < got.size(); ++i) expect_same_bits(want[i], got[i]);
}

TEST_F(BundleTest, ASignatureTheBundleLacksGoesToTheFallbackOrIsAnErrorNamingIt) {
  const Model model(rng_);
  saved(model);
  try {
    load_compiled(path("bundle"))(inputs(5));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("f32[5, 12] on cpu"), std::string::npos) << message;
    EXPECT_NE(message.find("f32[4, 12] on cpu"), std::string::npos) << message;
    EXPECT_NE(message.find("fallback"), std::string::npos) << message;
  }
  Compiled with_fallback =
      load_compiled(path("bundle"), [&model](const std::vector<Tensor>& in) { return model(in); });
  const std::vector<Tensor> in = inputs(5);
  const Stats before = stats();
  const std::vector<Tensor> got = with_fallback(in);
  EXPECT_EQ(stats().compiled_records - before.compiled_records, 1);
  const std::vector<Tensor> want = model(in);
  for (size_t i = 0; i < got.size(); ++i) expect_same_bits(want[i], got[i]);
  EXPECT_EQ(with_fallback.num_signatures(), 3u);
}

TEST_F(BundleTest, CorruptOrTruncatedFilesAreRefusedByName) {
  const Model model(rng_);
  saved(model);
  const fs::path bundle = dir_ / "bundle";
  const std::string constants = read_text(bundle / "constants.bin");
  const std::string plans = read_text(bundle / "plans.json");
  auto expect_refused = [&](const std::string& needle) {
    try {
      load_compiled(bundle.string());
      ADD_FAILURE() << "expected kiln::Error mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_FALSE(jit::describe_bundle(bundle.string()).ok());
  };
  std::string flipped = constants;
  flipped[flipped.size() / 2] ^= 0x10;
  write_text(bundle / "constants.bin", flipped);
  expect_refused("constants.bin is corrupt or truncated");
  write_text(bundle / "constants.bin", constants);
  write_text(bundle / "plans.json", plans.substr(0, plans.size() / 3));
  expect_refused("plans.json is corrupt or truncated");
  write_text(bundle / "plans.json", plans);
  fs::remove(bundle / "constants.bin");
  expect_refused("constants.bin is missing");
  write_text(bundle / "constants.bin", constants);
  const std::string manifest = read_text(bundle / "bundle.json");
  write_text(bundle / "bundle.json", manifest.substr(0, manifest.size() - 9));
  expect_refused("bundle.json is not valid JSON");
  write_text(bundle / "bundle.json", manifest);
  // Restored, it loads again.
  EXPECT_EQ(load_compiled(bundle.string()).num_signatures(), 2u);
}

// plans.json edited as a damaged or hand-made bundle might be, with a manifest that matches
// it, so that only the plan checks can refuse it; each refusal names what is wrong.
TEST_F(BundleTest, PlansThatBreakTheirStructureAreRefusedByWhatIsWrong) {
  const Model model(rng_);
  saved(model);
  const fs::path bundle = dir_ / "bundle";
  const std::string original = read_text(bundle / "plans.json");
  const std::string original_manifest = read_text(bundle / "bundle.json");
  auto expect_refused = [&](const std::string& text, const std::string& needle) {
    write_text(bundle / "plans.json", text);
    nlohmann::json manifest = nlohmann::json::parse(original_manifest);
    for (nlohmann::json& file : manifest["files"]) {
      if (file["name"] == "plans.json") {
        file["bytes"] = text.size();
        file["crc32"] = base::crc32_of(text);
      }
    }
    write_text(bundle / "bundle.json", manifest.dump());
    try {
      load_compiled(bundle.string());
      ADD_FAILURE() << "expected kiln::Error mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    const absl::StatusOr<std::string> listed = jit::describe_bundle(bundle.string());
    EXPECT_FALSE(listed.ok()) << *listed;
  };
  auto edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json plans = nlohmann::json::parse(original);
    edit(plans);
    return plans.dump();
  };
  expect_refused(edited([](nlohmann::json& p) {
                   p["signatures"][0]["plan"]["kernels"][0]["launch"]["inputs"][0] = 100000;
                 }),
                 "signature 0's plan: a plan buffer");
  // Releasing an input for reuse would let a later kernel overwrite a captured weight.
  expect_refused(edited([](nlohmann::json& p) {
                   nlohmann::json& plan = p["signatures"][0]["plan"];
                   plan["release_after"][0].push_back(plan["input_nodes"][0]);
                 }),
                 "kernel 0 releases an input or an output");
  expect_refused(edited([](nlohmann::json& p) {
                   nlohmann::json& plan = p["signatures"][0]["plan"];
                   plan["kernels"][0]["launch"]["inputs"][0] = plan["outputs"][0];
                 }),
                 "kernel 0 reads a buffer nothing wrote");
  expect_refused(edited([](nlohmann::json& p) {
                   for (nlohmann::json& program : p["programs"]) {
                     for (nlohmann::json& in : program["instrs"]) {
                       if (in["kind"] == "binary") in["operands"][1] = -1;
                     }
                   }
                 }),
                 "an operand missing, after its user or in another space");
  expect_refused(edited([](nlohmann::json& p) { p["programs"][0]["num_params"] = -3; }),
                 "program 0: \"num_params\"");
  expect_refused(std::string(5000, '[') + std::string(5000, ']'),
                 "plans.json is not a JSON object");
  write_text(bundle / "plans.json", original);
  write_text(bundle / "bundle.json", original_manifest);
  EXPECT_EQ(load_compiled(bundle.string()).num_signatures(), 2u);
}

TEST_F(BundleTest, AnotherKilnVersionIsAnErrorOrTheFallback) {
  const Model model(rng_);
  saved(model);
  const fs::path manifest_path = dir_ / "bundle" / "bundle.json";
  nlohmann::json manifest = nlohmann::json::parse(read_text(manifest_path));
  manifest["kiln"] = "0.0.1";
  write_text(manifest_path, manifest.dump());
  try {
    load_compiled(path("bundle"));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("written by Kiln \"0.0.1\""), std::string::npos)
        << e.what();
  }
  Compiled f =
      load_compiled(path("bundle"), [&model](const std::vector<Tensor>& in) { return model(in); });
  EXPECT_EQ(f.num_signatures(), 0u);
  const std::vector<Tensor> in = inputs(4);
  const std::vector<Tensor> got = f(in), want = model(in);
  for (size_t i = 0; i < got.size(); ++i) expect_same_bits(want[i], got[i]);
}

TEST_F(BundleTest, SavingNothingOrOverSomethingElseIsRefusedAndLeavesItAlone) {
  Compiled nothing = compile([](const std::vector<Tensor>& in) { return in; });
  EXPECT_THROW(save_compiled(nothing, path("empty")), Error);
  EXPECT_FALSE(fs::exists(dir_ / "empty"));
  fs::create_directories(dir_ / "mine");
  write_text(dir_ / "mine" / "notes.txt", "keep me");
  const Model model(rng_);
  Compiled f = saved(model);
  try {
    save_compiled(f, path("mine"));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a bundle"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(dir_ / "mine" / "notes.txt"), "keep me");
  // A bundle is replaced by a new one in its place, named with or without a trailing slash,
  // and nothing is left beside it.
  Compiled one = compile([&model](const std::vector<Tensor>& in) { return model(in); });
  one(inputs(3));
  save_compiled(one, path("bundle") + "/");
  EXPECT_EQ(load_compiled(path("bundle")).num_signatures(), 1u);
  save_compiled(f, path("bundle"));
  EXPECT_EQ(load_compiled(path("bundle")).num_signatures(), 2u);
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"bundle", "mine"}));
}

TEST_F(BundleTest, KilnBundleListsSignaturesKernelsAndMachineCode) {
  const Model model(rng_);
  saved(model);
  const testing::Result listed =
      testing::run(std::string(KILN_TOOL_PATH) + " bundle " + path("bundle"));
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("signature 0: (f32[4, 12] on cpu, f32[2, 2] on cpu) on cpu"),
            std::string::npos)
      << listed.output;
  EXPECT_NE(listed.output.find("signature 1: (f32[7, 12] on cpu"), std::string::npos)
      << listed.output;
  EXPECT_NE(listed.output.find("[rownorm]"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("machine code:"), std::string::npos) << listed.output;
  write_text(dir_ / "bundle" / "constants.bin", "x");
  const testing::Result corrupt =
      testing::run(std::string(KILN_TOOL_PATH) + " bundle " + path("bundle"));
  EXPECT_EQ(corrupt.exit_code, 1) << corrupt.output;
  EXPECT_NE(corrupt.output.find("constants.bin is corrupt"), std::string::npos) << corrupt.output;
}

// Every program and plan the planner makes, over the kernel corpus (every family and dtype)
// and a few hundred random programs, reads back from its JSON as it was: the plan checks
// refuse nothing the planner makes. Custom functions and kernels are the one refusal.
TEST(PlanFormatTest, EveryPlannedProgramAndPlanReadsBackAsItWas) {
  std::vector<Tensor> results = kernel_corpus();
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::vector<Tensor> made =
        testing::ProgramGenerator(testing::test_seed() + seed).generate(12);
    results.insert(results.end(), made.begin(), made.end());
  }
  int programs = 0, refused = 0;
  for (const Tensor& t : results) {
    const jit::Trace trace = jit::build_trace({detail::TensorAccess::node(t).get()});
    const std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
    std::vector<std::shared_ptr<const jit::KernelProgram>> table;
    std::vector<int> index;
    bool custom = false;
    for (const jit::PlannedKernel& k : plan->kernels) {
      const absl::StatusOr<jit::KernelProgram> back =
          jit::program_from_json(jit::program_to_json(*k.program));
      if (!back.ok()) {
        ASSERT_NE(back.status().message().find("not held in bundles"), std::string::npos)
            << back.status() << "\n"
            << k.program->to_string();
        custom = true;
        ++refused;
        continue;
      }
      ASSERT_EQ(back->to_string(), k.program->to_string());
      ASSERT_EQ(jit::program_to_json(*back), jit::program_to_json(*k.program));
      index.push_back(static_cast<int>(table.size()));
      table.push_back(std::make_shared<const jit::KernelProgram>(*back));
      ++programs;
    }
    if (custom) continue;
    const nlohmann::json written = jit::plan_to_json(*plan, index);
    const absl::StatusOr<jit::LaunchPlan> read = jit::plan_from_json(written, table);
    ASSERT_TRUE(read.ok()) << read.status() << "\n" << plan->description;
    ASSERT_EQ(jit::plan_to_json(*read, index), written);
  }
  EXPECT_GT(programs, 300);
  std::printf("plan format: %d programs read back, %d custom ones refused\n", programs, refused);
}

// A compiled CPU loop travels in the bundle and is installed into another cache folder under
// its own key, byte for byte.
TEST_F(BundleTest, CompiledCpuLoopsTravelIntoAnotherCache) {
  namespace cpu = runtime::cpu;
  if (!cpu::host_compiler_enabled() || default_device().type != DeviceType::CPU) {
    GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0) or the device is not the CPU";
  }
  cpu::set_host_compile_mode(cpu::HostCompileMode::kWait);
  cpu::set_compiled_pointwise_min_elements(0);
  Compiled f = compile([](const std::vector<Tensor>& in) {
    return std::vector{sigmoid(tanh(in[0]) * 1.25) - square(in[0]) * 0.5};
  });
  const Tensor x = random_tensor({4099}, rng_);
  f({x});
  const std::vector<Tensor> first = f({x});
  const bool ran_compiled = cpu::last_kernel_ran_compiled_loop();
  save_compiled(f, path("bundle"));
  cpu::set_compiled_pointwise_min_elements(-1);
  cpu::set_host_compile_mode(std::nullopt);
  ASSERT_TRUE(ran_compiled);

  const absl::StatusOr<std::string> listing = jit::describe_bundle(path("bundle"));
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_NE(listing->find("machine code: 1 kernels for cpu (c++ " + cpu::host_compiler_flags() +
                          "), fits this machine"),
            std::string::npos)
      << *listing;
  const char* old = std::getenv("KILN_CACHE_DIR");
  const std::string saved_cache = old == nullptr ? "" : old;
  ::setenv("KILN_CACHE_DIR", path("fresh_cache").c_str(), 1);
  Compiled loaded = load_compiled(path("bundle"));
  const std::string key = read_text(dir_ / "bundle" / "code" / "cpu" / "0.key");
  const absl::StatusOr<std::string> installed = cpu::read_cached_library(key);
  if (old == nullptr) {
    ::unsetenv("KILN_CACHE_DIR");
  } else {
    ::setenv("KILN_CACHE_DIR", saved_cache.c_str(), 1);
  }
  ASSERT_TRUE(installed.ok()) << installed.status();
  EXPECT_EQ(*installed, read_text(dir_ / "bundle" / "code" / "cpu" / "0.bin"));
  EXPECT_TRUE(fs::exists(dir_ / "fresh_cache" / "cpu"));
  expect_same_bits(first[0], loaded({x})[0]);
}

}  // namespace
}  // namespace kiln
