// Bundles of compiled functions (kiln/compile.h: save_compiled, load_compiled; the format is
// in docs/bundles.md), and what `kiln bundle` prints about one.
#ifndef KILN_JIT_EVAL_COMPILED_BUNDLE_H_
#define KILN_JIT_EVAL_COMPILED_BUNDLE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jit/eval/compiled_recording.h"

namespace kiln::jit {

inline constexpr const char* kBundleFormat = "kiln.bundle";
inline constexpr int kBundleVersion = 1;

// A readable listing of the bundle in `dir` after checking every file it lists: its version,
// each signature with its kernels, the captured tensors, and the machine code per device
// with the target it was built for (and whether it fits this machine). An error names the
// file and what is wrong with it.
absl::StatusOr<std::string> describe_bundle(const std::string& dir);

struct BundleRecording {
  Signature signature;
  std::shared_ptr<Recording> recording;
};

// Everything load_compiled does but wrap the recordings in a Compiled: reads and checks the
// bundle in `dir` (an error for any other Kiln version), shares its programs through the
// kernel cache, installs the machine code that fits this machine and prepares the captured
// weights. Throws kiln::Error naming the file and what is wrong with it.
std::vector<BundleRecording> read_bundle_recordings(const std::string& dir);

}  // namespace kiln::jit

#endif  // KILN_JIT_EVAL_COMPILED_BUNDLE_H_
