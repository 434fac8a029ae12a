// Session: a KV cache and the position it is filled to; prefill runs the forward in chunks.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/llm.h"
#include "llm/llama_forward.h"
#include "llm/model_data.h"
#include "llm/sampling.h"

namespace kiln::llm {
namespace {

// A prompt is run this many tokens at a time: each chunk's activations are [chunk, width],
// and its attention reads the cache written so far (bottom-right causal alignment).
constexpr int64_t kPrefillChunk = 256;

}  // namespace

struct Session::State {
  std::shared_ptr<const Model::Data> model;
  KvCache cache;
  int64_t position = 0;
  std::vector<int32_t> history;  // every id run so far, for the repeat penalty
  uint64_t draws = 0;
  Generation last;
};

Session::Session(const Model& model, int64_t max_tokens) : state_(std::make_unique<State>()) {
  const int64_t context = model.data_->config.context;
  if (max_tokens < 0) {
    throw Error("[llm::Session] max_tokens " + std::to_string(max_tokens) +
                ", expected >= 0 (0: the model's context of " + std::to_string(context) + ")");
  }
  state_->model = model.data_;
  state_->cache = empty_kv_cache(*model.data_, max_tokens == 0 ? context : max_tokens);
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

Tensor Session::prefill(const std::vector<int32_t>& ids) {
  State& s = *state_;
  const int64_t vocab = s.model->config.vocab;
  if (ids.empty()) throw Error("[llm::Session::prefill] no token ids");
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      throw Error("[llm::Session::prefill] token id " + std::to_string(id) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  const auto count = static_cast<int64_t>(ids.size());
  if (s.position + count > s.cache.capacity) {
    throw Error("[llm::Session::prefill] " + std::to_string(count) + " tokens after " +
                std::to_string(s.position) + " exceed the Session's " +
                std::to_string(s.cache.capacity) + " positions (max_tokens)");
  }
  Tensor logits;
  for (int64_t first = 0; first < count; first += kPrefillChunk) {
    const int64_t n = std::min(kPrefillChunk, count - first);
    const std::vector<int32_t> chunk(ids.begin() + first, ids.begin() + first + n);
    KvCache next = s.cache;
    logits = llama_forward(*s.model, next, chunk, s.position);
    std::vector<Tensor> outputs{logits};
    outputs.insert(outputs.end(), next.keys.begin(), next.keys.end());
    outputs.insert(outputs.end(), next.values.begin(), next.values.end());
    // The cache is written in place when nothing but the pending writes holds it.
    s.cache.keys.clear();
    s.cache.values.clear();
    try {
      eval(outputs);
    } catch (...) {
      reset();  // the writes may have happened in part: start again from an empty cache
      throw;
    }
    s.cache = std::move(next);
    s.position += n;
  }
  s.history.insert(s.history.end(), ids.begin(), ids.end());
  return logits;
}

Tensor Session::step(int32_t id) { return prefill({id}); }

int32_t Session::sample(const Tensor& logits, const Sampling& sampling) {
  State& s = *state_;
  if (logits.shape() != std::vector<int64_t>{s.model->config.vocab}) {
    throw Error("[llm::Session::sample] logits of shape [" + std::to_string(logits.numel()) +
                " elements], expected [" + std::to_string(s.model->config.vocab) + "]");
  }
  const int32_t id =
      pick_token(logits.astype(DType::F32).to_vector<float>(), sampling, s.history, s.draws);
  ++s.draws;  // only a draw that happened counts
  return id;
}

std::string Session::generate(std::string_view prompt, int max_new_tokens, const Sampling& s,
                              const std::function<bool(std::string_view piece)>& on_piece) {
  using Clock = std::chrono::steady_clock;
  const Model::Data& model = *state_->model;
  const std::vector<int32_t> ids =
      prompt_ids(model, prompt, state_->position == 0, "llm::Session::generate");
  Generation g;
  g.prompt_tokens = static_cast<int64_t>(ids.size());
  const Clock::time_point start = Clock::now();
  Tensor logits = prefill(ids);
  const Clock::time_point prefilled = Clock::now();
  g.prefill_seconds = std::chrono::duration<double>(prefilled - start).count();
  Tokenizer::Decoder decoder(*model.tokenizer, /*continues=*/true);  // after the prompt
  std::string text;
  bool listening = true;  // until on_piece returns false
  auto emit = [&](const std::string& piece) {
    text += piece;
    if (listening && on_piece && !piece.empty()) listening = on_piece(piece);
    return listening;
  };
  for (int i = 0; i < max_new_tokens; ++i) {
    const int32_t id = sample(logits, s);
    ++g.new_tokens;
    if (std::find(model.end_of_turn.begin(), model.end_of_turn.end(), id) !=
        model.end_of_turn.end()) {
      break;
    }
    if (!emit(decoder.push(id))) break;
    if (i + 1 == max_new_tokens || position() == max_tokens()) break;
    logits = step(id);
  }
  emit(decoder.flush());
  g.decode_seconds = std::chrono::duration<double>(Clock::now() - prefilled).count();
  state_->last = g;
  return text;
}

Session::Generation Session::last_generation() const { return state_->last; }

int64_t Session::position() const { return state_->position; }
int64_t Session::max_tokens() const { return state_->cache.capacity; }

void Session::reset() {
  State& s = *state_;
  s.cache = empty_kv_cache(*s.model, s.cache.capacity);
  s.position = 0;
  s.history.clear();
  s.draws = 0;
  s.last = {};
}

}  // namespace kiln::llm
