// libFuzzer target: kiln::load_safetensors and load_safetensors_metadata on arbitrary bytes:
// tensors (or metadata) or kiln::Error, never a crash or a read outside the file.
#include <cstdint>

#include "fuzz/fuzz_file.h"
#include "kiln/kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::write_input(data, size, ".safetensors");
  try {
    for (const auto& [name, t] : kiln::load_safetensors(path)) {
      if (!t.is_realized() || name.empty()) __builtin_trap();
    }
  } catch (const kiln::Error&) {
  }
  try {
    for (const auto& [key, value] : kiln::load_safetensors_metadata(path)) {
      if (key.size() + value.size() > size) __builtin_trap();
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
