// Fuzz targets for file readers write each input to a file of their own (the readers take
// paths), in /dev/shm when it exists so that thousands of runs a second stay in memory.
#ifndef KILN_FUZZ_FUZZ_FILE_H_
#define KILN_FUZZ_FUZZ_FILE_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace kiln::fuzz {

inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path =
      (std::filesystem::exists("/dev/shm") ? std::string("/dev/shm") : std::string("/tmp")) +
      "/kiln_fuzz_" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f != nullptr) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace kiln::fuzz

#endif  // KILN_FUZZ_FUZZ_FILE_H_
