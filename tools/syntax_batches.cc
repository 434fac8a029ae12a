#include "tools/syntax_batches.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/thread_pool.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace kiln::tools {
namespace {

namespace cuda = runtime::cuda;

// Where a generated module's shared preamble ends (runtime/cuda/cuda_renderer.cc writes it).
constexpr std::string_view kEndOfPreamble = "// ---- end of preamble ----\n";
// Modules per program: large enough that the preamble is a small part of each program, small
// enough that the batches keep every core busy.
constexpr size_t kBatchSize = 48;

struct Batch {
  std::string preamble;
  std::vector<size_t> members;  // indices into the kernels
};

// The modules grouped by preamble, in batches of at most kBatchSize; a module without the
// marker (a custom kernel's) is a batch of its own with an empty preamble.
std::vector<Batch> make_batches(const std::vector<cuda::KernelSource>& kernels) {
  std::map<std::string_view, std::vector<size_t>> by_preamble;
  std::vector<Batch> batches;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string& source = kernels[i].source;
    const size_t end = source.find(kEndOfPreamble);
    if (end == std::string::npos) {
      batches.push_back({"", {i}});
      continue;
    }
    by_preamble[std::string_view(source).substr(0, end + kEndOfPreamble.size())].push_back(i);
  }
  for (const auto& [preamble, members] : by_preamble) {
    for (size_t b = 0; b < members.size(); b += kBatchSize) {
      Batch batch{std::string(preamble), {}};
      for (size_t m = b; m < members.size() && m < b + kBatchSize; ++m) {
        batch.members.push_back(members[m]);
      }
      batches.push_back(std::move(batch));
    }
  }
  return batches;
}

// One program: the preamble, then each member's code in namespace kiln_module_<k>.
std::string batch_source(const Batch& batch, const std::vector<cuda::KernelSource>& kernels) {
  if (batch.preamble.empty()) return kernels[batch.members.front()].source;
  std::string out = batch.preamble;
  for (size_t k = 0; k < batch.members.size(); ++k) {
    const std::string& source = kernels[batch.members[k]].source;
    const std::string_view code = std::string_view(source).substr(batch.preamble.size());
    absl::StrAppend(&out, "namespace kiln_module_", k, " {  // ", kernels[batch.members[k]].name,
                    "\n",
                    absl::StrReplaceAll(absl::string_view(code.data(), code.size()),
                                        {{"extern \"C\" __global__", "__global__"}}),
                    "\n}\n");
  }
  return out;
}

}  // namespace

std::vector<absl::Status> check_syntax_in_batches(const std::vector<cuda::KernelSource>& kernels,
                                                  const std::vector<int>& archs) {
  const std::vector<Batch> batches = make_batches(kernels);
  const size_t n = kernels.size();
  std::vector<absl::Status> results(archs.size() * n);
  base::parallel_for(
      static_cast<int64_t>(archs.size() * batches.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const Batch& batch = batches[i % batches.size()];
          const size_t a = i / batches.size();
          const absl::Status whole = cuda::check_device_syntax(
              batch_source(batch, kernels), kernels[batch.members.front()].name, archs[a]);
          for (size_t m : batch.members) {
            // The module alone, for its own log, only when the batch failed.
            results[a * n + m] =
                whole.ok() || batch.preamble.empty()
                    ? whole
                    : cuda::check_device_syntax(kernels[m].source, kernels[m].name, archs[a]);
          }
        }
      });
  return results;
}

}  // namespace kiln::tools
