// An application that ships its kernels: all-MiniLM-L6-v2's encoder saved as a bundle once,
// then run from the bundle alone, with no model files, no recording, no planning and no
// compiler (docs/embedding.md walks through it; docs/bundles.md has the format).
//
//   build/samples/bundled_embeddings save BUNDLE [--model DIR]   # where the model is
//   build/samples/bundled_embeddings run BUNDLE                  # where the application runs
//
// Both print the embeddings' checksum, so the two can be compared; `run` also prints how long
// its first call took against a warm one, and what Kiln counted: plans built and kernels
// generated stay 0. DIR defaults to $KILN_MINILM_DIR, else where scripts/fetch-minilm.sh puts
// the model.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "samples/minilm.h"
#include "samples/model_cache.h"

namespace {

using kiln::Tensor;

// Two sentences' WordPiece ids ("[CLS] the cat sat on the mat . [SEP]" and a shorter one),
// padded to one shape: the signature the bundle is made for.
kiln::samples::PaddedRows example_input() {
  return kiln::samples::pad_rows(
      {{101, 1996, 4937, 2938, 2006, 1996, 13523, 1012, 102}, {101, 1037, 3899, 2003, 2652, 102}});
}

// FNV-1a over the embeddings' bytes: equal checksums, equal bits.
uint64_t checksum(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  for (float v : t.to_vector<float>()) {
    const auto bits = std::bit_cast<uint32_t>(v);
    for (int b = 0; b < 4; ++b) h = (h ^ ((bits >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

int save(const std::string& bundle, const std::string& model_dir) {
  const kiln::samples::MiniLM model = kiln::samples::load_minilm(model_dir);
  kiln::Compiled embed = kiln::samples::compile_embed_padded(model);
  const kiln::samples::PaddedRows in = example_input();
  const Tensor out = embed({in.ids, in.mask})[0];
  kiln::save_compiled(embed, bundle);
  std::printf("saved %s for ids of %lld rows of %lld tokens\n", bundle.c_str(),
              static_cast<long long>(in.ids.shape()[0]), static_cast<long long>(in.ids.shape()[1]));
  std::printf("embeddings checksum: %016llx\n", static_cast<unsigned long long>(checksum(out)));
  return 0;
}

int run(const std::string& bundle) {
  const kiln::samples::PaddedRows in = example_input();
  kiln::eval({in.ids, in.mask});
  kiln::reset_stats();
  kiln::Compiled embed = kiln::load_compiled(bundle);  // no fallback: only what was saved
  auto start = std::chrono::steady_clock::now();
  const Tensor first = embed({in.ids, in.mask})[0];
  const uint64_t sum = checksum(first);  // reads the result: the call has finished
  const double first_ms = milliseconds_since(start);
  const kiln::Stats counted = kiln::stats();
  std::vector<double> warm;
  for (int i = 0; i < 5; ++i) {
    start = std::chrono::steady_clock::now();
    checksum(embed({in.ids, in.mask})[0]);
    warm.push_back(milliseconds_since(start));
  }
  std::sort(warm.begin(), warm.end());
  std::printf("embeddings checksum: %016llx\n", static_cast<unsigned long long>(sum));
  std::printf("first call %.2f ms, warm call %.2f ms (median of 5)\n", first_ms, warm[2]);
  std::printf("plans built: %lld, kernels generated: %lld\n",
              static_cast<long long>(counted.plans_built),
              static_cast<long long>(counted.kernels_compiled));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc >= 3 ? argv[1] : "";
    if (command == "save") {
      std::string model_dir = std::getenv("KILN_MINILM_DIR") != nullptr
                                  ? std::getenv("KILN_MINILM_DIR")
                                  : kiln::samples::model_cache_dir() + "/all-MiniLM-L6-v2";
      if (argc == 5 && std::string(argv[3]) == "--model") model_dir = argv[4];
      return save(argv[2], model_dir);
    }
    if (command == "run" && argc == 3) return run(argv[2]);
    std::fprintf(stderr,
                 "usage: bundled_embeddings save BUNDLE [--model DIR]\n"
                 "       bundled_embeddings run BUNDLE\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
