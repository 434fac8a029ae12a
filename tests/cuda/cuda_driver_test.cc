// The driver loader against the CUDA Toolkit's stub libcuda (which exports every entry point
// and answers each call with an error): every symbol Kiln asks for exists under that name,
// and a failing driver call is reported with its name and the driver's text.
#include <filesystem>

#include "runtime/cuda/driver.h"
#include "tests/test_util.h"

namespace kiln::runtime::cuda {
namespace {

std::string stub_libcuda() {
  for (const char* dir :
       {"/usr/local/cuda/lib64/stubs", "/usr/local/cuda/targets/x86_64-linux/lib/stubs"}) {
    const std::string path = std::string(dir) + "/libcuda.so";
    if (std::filesystem::exists(path)) return path;
  }
  return "";
}

TEST(CudaDriver, EveryEntryPointKilnLoadsExistsInTheToolkitStub) {
  const std::string stub = stub_libcuda();
  ASSERT_FALSE(stub.empty()) << "the CUDA Toolkit's stubs/libcuda.so is needed (CI installs it)";
  const DriverApi api = load_driver_api(stub.c_str());
  ASSERT_TRUE(api.status.ok()) << api.status;
  EXPECT_NE(api.graph_launch, nullptr);
  EXPECT_NE(api.stream_begin_capture, nullptr);
  // The stub answers every call with an error; it comes back named, never as a crash.
  const absl::Status s = check_cuda(api.init(0), "cuInit");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cuInit failed"), std::string::npos) << s;
}

TEST(CudaDriver, AMissingDriverIsAClearError) {
  const DriverApi api = load_driver_api("libkiln_no_such_driver.so.1");
  EXPECT_FALSE(api.status.ok());
  EXPECT_NE(api.status.message().find("libkiln_no_such_driver.so.1 not found"), std::string::npos)
      << api.status;
}

}  // namespace
}  // namespace kiln::runtime::cuda
