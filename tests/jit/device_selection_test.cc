// KILN_DEVICE's syntax and the backend registry: cuda:N names GPU N or is a clear error. Most
// machines that run this have no usable GPU; the tests hold either way.
#include <string>

#include "jit/backend/backend.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using jit::device_from_setting;

bool cuda_usable() { return jit::device_usable({DeviceType::CUDA, 0}).ok(); }

// The number of usable GPUs (0 where CUDA is not usable).
int cuda_device_count() {
  int count = 0;
  while (count < 64 && jit::device_usable({DeviceType::CUDA, count}).ok()) ++count;
  return count;
}

TEST(DeviceSelection, CpuAndAuto) {
  EXPECT_EQ(device_from_setting("cpu"), (Device{DeviceType::CPU, 0}));
  const Device automatic = cuda_usable() ? Device{DeviceType::CUDA, 0} : Device{DeviceType::CPU, 0};
  EXPECT_EQ(device_from_setting("auto"), automatic);
  EXPECT_EQ(device_from_setting(""), automatic);
}

TEST(DeviceSelection, MalformedSettingsAreErrorsNamingThem) {
  testing::expect_error([] { device_from_setting("gpu"); },
                        {"KILN_DEVICE='gpu'", "cpu, cuda, cuda:N, auto"});
  testing::expect_error([] { device_from_setting("cuda:abc"); },
                        {"KILN_DEVICE='cuda:abc'", "non-negative integer"});
  testing::expect_error([] { device_from_setting("cuda:-1"); },
                        {"KILN_DEVICE='cuda:-1'", "non-negative integer"});
  testing::expect_error([] { device_from_setting("cuda:"); }, {"KILN_DEVICE='cuda:'"});
  testing::expect_error([] { device_from_setting("cuda:1x"); }, {"KILN_DEVICE='cuda:1x'"});
  testing::expect_error([] { device_from_setting("cuda:99999999999"); },
                        {"KILN_DEVICE='cuda:99999999999'"});
  testing::expect_error([] { device_from_setting("cuda:cuda"); }, {"KILN_DEVICE='cuda:cuda'"});
}

// cuda:N selects GPU N, never silently another one.
TEST(DeviceSelection, CudaIndexSelectsThatGpuOrSaysWhyNot) {
  const int count = cuda_device_count();
  for (int index : {0, 1, 7}) {
    const std::string setting = "cuda:" + std::to_string(index);
    if (index < count) {
      EXPECT_EQ(device_from_setting(setting), (Device{DeviceType::CUDA, index}));
    } else if (count == 0) {  // no driver, no GPU or no NVRTC: the reason
      testing::expect_error([&] { device_from_setting(setting); },
                            {"KILN_DEVICE=" + setting, "no CUDA device is usable ("});
    } else {  // the index and how many GPUs there are
      testing::expect_error(
          [&] { device_from_setting(setting); },
          {"KILN_DEVICE=" + setting, "there is no CUDA device " + std::to_string(index),
           std::to_string(count) + " CUDA device"});
    }
  }
  if (count > 0) EXPECT_EQ(device_from_setting("cuda"), (Device{DeviceType::CUDA, 0}));
}

TEST(DeviceSelection, UnusableDevicesAreErrorsEverywhere) {
  const int count = cuda_device_count();
  if (count > 7) GTEST_SKIP() << "cuda:7 exists here";
  const Device seven{DeviceType::CUDA, 7};
  absl::Status s = jit::device_usable(seven);
  EXPECT_FALSE(s.ok());
  if (count > 0) {
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
    EXPECT_NE(s.message().find("device 7"), std::string::npos) << s;
  }
  testing::expect_error([&] { jit::backend_for(seven); }, {"device cuda:7 is not usable"});
  testing::expect_error([&] { set_default_device(seven); }, {"set_default_device(cuda:7)"});
  EXPECT_FALSE(jit::device_usable({DeviceType::CPU, 1}).ok());
  EXPECT_TRUE(jit::device_usable({DeviceType::CPU, 0}).ok());
}

// The process picks its device from KILN_DEVICE at the first op.
TEST(DeviceSelection, EnvironmentErrorsStopTheProgramWithTheMessage) {
  testing::Result bad = testing::run(std::string("KILN_DEVICE=cuda:abc ") + KILN_DEMO_PATH);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("KILN_DEVICE='cuda:abc'"), std::string::npos) << bad.output;
  if (cuda_device_count() <= 7) {
    testing::Result seven = testing::run(std::string("KILN_DEVICE=cuda:7 ") + KILN_DEMO_PATH);
    EXPECT_NE(seven.exit_code, 0);
    EXPECT_NE(seven.output.find("KILN_DEVICE=cuda:7"), std::string::npos) << seven.output;
  }
}

// Dumps and explain_plan show CUDA C++ whether or not a GPU is usable.
TEST(DeviceSelection, SourceRendererNeedsNoGpu) {
  const jit::SourceRenderer* r = jit::dump_source_renderer();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r, jit::source_renderer(DeviceType::CUDA));
  EXPECT_EQ(r->language(), "CUDA C++");
  EXPECT_EQ(r->file_extension(), ".cu");
  EXPECT_EQ(jit::source_renderer(DeviceType::CPU), nullptr);
  Tensor y = relu(Tensor::randn({4, 8}, 1) * 2.0);
  const std::string cuda = explain_plan({y}, ExplainDetail::kCuda);
  EXPECT_NE(cuda.find("(CUDA C++)"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("__global__"), std::string::npos) << cuda;
}

}  // namespace
}  // namespace kiln
