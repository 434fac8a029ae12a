// libFuzzer target: kiln::load_npy on arbitrary bytes: a tensor of the declared size or
// kiln::Error, never a crash or an out-of-bounds read.
#include <cstdint>

#include "fuzz/fuzz_file.h"
#include "kiln/kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::write_input(data, size, ".npy");
  try {
    kiln::Tensor t = kiln::load_npy(path);
    int64_t n = 1;
    for (int64_t d : t.shape()) n *= d;
    if (n != t.numel() || !t.is_realized()) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  return 0;
}
