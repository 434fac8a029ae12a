// A conversation with a language model from a GGUF file, one line of input per turn, on one
// kiln::llm::Session: each turn's prompt goes into the same KV cache after the answers before
// it, so the model sees the whole conversation and nothing is run twice.
//
//   scripts/fetch-smollm2.sh
//   build/samples/chat ~/.cache/kiln/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
//
// Options: --max-tokens N (per answer, default 256), --temperature T (default 0: greedy),
// --seed S. An empty line or the end of input ends the conversation.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "kiln/llm.h"

int main(int argc, char** argv) {
  try {
    std::string model_path;
    int max_tokens = 256;
    kiln::llm::Sampling sampling;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--max-tokens" && i + 1 < argc) {
        max_tokens = std::atoi(argv[++i]);
      } else if (arg == "--temperature" && i + 1 < argc) {
        sampling.temperature = std::atof(argv[++i]);
      } else if (arg == "--seed" && i + 1 < argc) {
        sampling.seed = std::strtoull(argv[++i], nullptr, 10);
      } else {
        model_path = arg;
      }
    }
    if (model_path.empty()) {
      std::fprintf(stderr,
                   "usage: chat MODEL.gguf [--max-tokens N] [--temperature T] [--seed S]\n");
      return 2;
    }
    const kiln::llm::Model model = kiln::llm::Model::load(model_path);
    kiln::llm::Session session(model, std::min<int64_t>(model.context_length(), 2048));
    std::printf("%s model, %lld tokens of context; an empty line ends.\n",
                model.architecture().c_str(), static_cast<long long>(session.max_tokens()));
    std::string line;
    for (bool first = true; std::printf("> "), std::fflush(stdout), std::getline(std::cin, line);
         first = false) {
      if (line.empty()) break;
      session.generate(model.chat_prompt(line, first), max_tokens, sampling,
                       [](std::string_view piece) {
                         std::fwrite(piece.data(), 1, piece.size(), stdout);
                         std::fflush(stdout);
                         return true;
                       });
      const kiln::llm::Session::Generation g = session.last_generation();
      std::printf("\n[%lld tokens, %.1f tok/s; %lld of %lld positions used]\n",
                  static_cast<long long>(g.new_tokens),
                  g.decode_seconds > 0 ? static_cast<double>(g.new_tokens) / g.decode_seconds : 0.0,
                  static_cast<long long>(session.position()),
                  static_cast<long long>(session.max_tokens()));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chat: %s\n", e.what());
    return 1;
  }
}
