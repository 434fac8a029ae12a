// libFuzzer target: kiln::load_trace on arbitrary text. Any input must either load or throw
// kiln::Error; a loaded trace must run over placeholder-free inputs of its declared types.
#include <cstdint>
#include <map>
#include <string>

#include "kiln/kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    kiln::LoadedTrace trace = kiln::load_trace(text);
    // Small traces are also recorded over zeros of the declared types (not computed: a
    // fuzzed shape may be huge); recording re-checks every node.
    std::map<std::string, kiln::Tensor> inputs;
    for (const kiln::LoadedTrace::Input& in : trace.inputs()) {
      int64_t n = 1;
      for (int64_t d : in.shape) n = d > 0 && n <= (int64_t{1} << 20) / d ? n * d : n + d;
      if (n > (1 << 16)) return 0;
      inputs[in.name] = kiln::Tensor::zeros(in.shape, in.dtype);
    }
    std::vector<kiln::Tensor> outs = trace.run(inputs);
    if (outs.size() != trace.num_outputs()) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  return 0;
}
