// A plan's kernels compiled together: every result in order, failures kept apart, and the
// caches (memory, then disk) in front of NVRTC.
#include "runtime/cuda/parallel_compile.h"

#include "absl/strings/str_cat.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "tests/test_util.h"

namespace kiln::runtime::cuda {
namespace {

class ParallelCompileTest : public testing::ScratchDirTest {
 protected:
  // Distinct small kernels, each scaling by its own factor (so no two cubins are equal).
  static std::vector<KernelSource> kernels(int count, int broken) {
    std::vector<KernelSource> out;
    for (int i = 0; i < count; ++i) {
      const std::string name = "scale_" + std::to_string(i);
      std::string body = i == broken ? "x[threadIdx.x] *= undeclared_name;"
                                     : "x[threadIdx.x] *= " + std::to_string(i + 2) + ".0f;";
      out.push_back({name, absl::StrCat("extern \"C\" __global__ void ", name, "(float* x) { ",
                                        body, " }\n")});
    }
    return out;
  }
};

TEST_F(ParallelCompileTest, EveryKernelGetsItsOwnCubinAndAFailureStaysWithItsKernel) {
  ASSERT_TRUE(nvrtc_available().ok()) << nvrtc_available().message();
  const std::vector<KernelSource> sources = kernels(6, /*broken=*/3);
  CubinCache cache(dir_.string(), int64_t{1} << 30);
  auto results = compile_in_parallel(cache, sources, 80);
  ASSERT_EQ(results.size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    if (i == 3) {
      ASSERT_FALSE(results[i].ok());
      EXPECT_NE(results[i].status().message().find("undeclared_name"), std::string::npos)
          << results[i].status();
      continue;
    }
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_EQ(results[i]->source, CubinCache::Source::kCompiled);
    // In order: each result is its own kernel's cubin, the one a lone compile gives.
    absl::StatusOr<std::string> alone = compile_to_cubin(sources[i].source, sources[i].name, 80);
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(results[i]->cubin, *alone) << sources[i].name;
    EXPECT_NE(results[i]->cubin.find(sources[i].name), std::string::npos);
  }
}

TEST_F(ParallelCompileTest, ASecondPlanUsesMemoryAndANewProcessUsesDisk) {
  ASSERT_TRUE(nvrtc_available().ok()) << nvrtc_available().message();
  const std::vector<KernelSource> sources = kernels(4, /*broken=*/-1);
  CubinCache cache(dir_.string(), int64_t{1} << 30);
  auto first = compile_in_parallel(cache, sources, 90);
  auto again = compile_in_parallel(cache, sources, 90);
  CubinCache fresh(dir_.string(), int64_t{1} << 30);  // as a new process would
  auto from_disk = compile_in_parallel(fresh, sources, 90);
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_TRUE(first[i].ok() && again[i].ok() && from_disk[i].ok());
    EXPECT_EQ(first[i]->source, CubinCache::Source::kCompiled);
    EXPECT_EQ(again[i]->source, CubinCache::Source::kMemory);
    EXPECT_EQ(from_disk[i]->source, CubinCache::Source::kDisk);
    EXPECT_EQ(from_disk[i]->cubin, first[i]->cubin);
  }
  // Another architecture is another key: compiled, not read.
  auto sm80 = compile_in_parallel(fresh, sources, 80);
  ASSERT_TRUE(sm80[0].ok());
  EXPECT_EQ(sm80[0]->source, CubinCache::Source::kCompiled);
}

}  // namespace
}  // namespace kiln::runtime::cuda
