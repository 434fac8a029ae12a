// libFuzzer target: kiln::load_gguf on arbitrary bytes: a file's metadata and tensors or
// kiln::Error, never a crash, a read outside the mapped file or an allocation the file's
// size does not bound.
#include <cstdint>

#include "fuzz/fuzz_file.h"
#include "kiln/kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::write_input(data, size, ".gguf");
  try {
    const kiln::GgufFile file = kiln::load_gguf(path);
    for (const auto& [name, t] : file.tensors) {
      if (!t.is_realized()) __builtin_trap();
      // Read every element: the mapped data must lie inside the file.
      (void)kiln::sum(t.astype(kiln::DType::F64), {}).item();
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
