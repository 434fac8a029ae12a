#include "tools/generate_command.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"
#include "kiln/io.h"
#include "kiln/kiln.h"
#include "kiln/llm.h"

namespace kiln::tools {
namespace {

int usage() {
  std::fprintf(stderr,
               "usage: kiln generate --model M.gguf --prompt TEXT [--max-tokens N] "
               "[--temperature T] [--top-k K] [--top-p P] [--repeat-penalty R] [--seed S] "
               "[--chat] [--threads N] [--logits-out F.npy]\n");
  return 2;
}

struct Options {
  std::map<std::string, std::string> values;  // --name value
  bool chat = false;
};

// "--name value" pairs and the one switch, --chat; false on anything else.
bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--chat") == 0) {
      o.chat = true;
      continue;
    }
    if (std::strncmp(argv[i], "--", 2) != 0 || i + 1 >= argc) return false;
    o.values[argv[i] + 2] = argv[i + 1];
    ++i;
  }
  return o.values.count("model") && o.values.count("prompt");
}

// The value of --name as a number, or `fallback` when absent; a kiln::Error when malformed.
template <class T>
T number(const Options& o, const std::string& name, T fallback) {
  auto it = o.values.find(name);
  if (it == o.values.end()) return fallback;
  T value{};
  bool ok = false;
  if constexpr (std::is_floating_point_v<T>) {
    ok = absl::SimpleAtod(it->second, &value);
  } else {
    ok = absl::SimpleAtoi(it->second, &value);
  }
  if (!ok) throw Error("--" + name + " '" + it->second + "' is not a number");
  return value;
}

}  // namespace

int generate_command(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return usage();
  for (const auto& [name, value] : o.values) {
    static const std::vector<std::string> known{
        "model", "prompt",         "max-tokens", "temperature", "top-k",
        "top-p", "repeat-penalty", "seed",       "threads",     "logits-out"};
    if (std::find(known.begin(), known.end(), name) == known.end()) return usage();
  }
  if (o.values.count("threads")) set_num_threads(number<int>(o, "threads", 1));
  llm::Sampling s;
  s.temperature = number<double>(o, "temperature", 0);
  s.top_k = number<int>(o, "top-k", 0);
  s.top_p = number<double>(o, "top-p", 1);
  s.repeat_penalty = number<double>(o, "repeat-penalty", 1);
  s.seed = number<uint64_t>(o, "seed", 0);
  const int max_tokens = number<int>(o, "max-tokens", 128);

  const llm::Model model = llm::Model::load(o.values["model"]);
  const std::string prompt = o.chat ? model.chat_prompt(o.values["prompt"]) : o.values["prompt"];
  const std::vector<int32_t> ids = model.prompt_ids(prompt);
  // A cache for this prompt and its answer, not the model's whole context (SmolLM2's 8192
  // positions would be 377 MB of keys and values).
  const int64_t positions = std::min<int64_t>(
      model.context_length(), static_cast<int64_t>(ids.size()) + std::max(max_tokens, 0));
  llm::Session session(model, positions);
  if (o.values.count("logits-out")) {  // a Session of its own: the prompt alone
    llm::Session logits_session(model, static_cast<int64_t>(ids.size()));
    save_npy(o.values["logits-out"], logits_session.prefill(ids));
  }
  session.generate(prompt, max_tokens, s, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  const llm::Session::Generation g = session.last_generation();
  const double rate =
      g.decode_seconds > 0 ? static_cast<double>(g.new_tokens) / g.decode_seconds : 0.0;
  std::printf("\nprefill: %lld tokens, %.1f ms; decode: %lld tokens, %.1f tok/s\n",
              static_cast<long long>(g.prompt_tokens), g.prefill_seconds * 1e3,
              static_cast<long long>(g.new_tokens), rate);
  return 0;
}

}  // namespace kiln::tools
