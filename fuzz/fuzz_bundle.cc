// libFuzzer target: a compiled bundle's plans.json (the Kernel IR programs, signatures, launch
// plans and tables of docs/bundles.md) on arbitrary bytes, given a manifest whose sizes and
// checksums match so that the plan checks themselves are what refuses a bad file: a listing
// or a status naming what is wrong, never a crash or an out-of-bounds read.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/checksum.h"
#include "jit/eval/compiled_bundle.h"
#include "kiln/error.h"

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir =
      (std::filesystem::exists("/dev/shm") ? std::string("/dev/shm") : std::string("/tmp")) +
      "/kiln_fuzz_bundle_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string plans(reinterpret_cast<const char*>(data), size);
  const std::string constants(4096, '\x3f');
  write(dir + "/plans.json", plans);
  write(dir + "/constants.bin", constants);
  write(dir + "/bundle.json",
        "{\"format\": \"kiln.bundle\", \"version\": " + std::to_string(kiln::jit::kBundleVersion) +
            ", \"kiln\": \"" KILN_VERSION_STRING "\", \"files\": [" +
            "{\"name\": \"plans.json\", \"bytes\": " + std::to_string(plans.size()) +
            ", \"crc32\": " + std::to_string(kiln::base::crc32_of(plans)) + "}, " +
            "{\"name\": \"constants.bin\", \"bytes\": " + std::to_string(constants.size()) +
            ", \"crc32\": " + std::to_string(kiln::base::crc32_of(constants)) + "}]}");
  try {
    (void)kiln::jit::describe_bundle(dir);
  } catch (const kiln::Error&) {
  }
  return 0;
}
