#include "llm/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>

#include "kiln/error.h"

namespace kiln::llm {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014) of seed and draw: a uniform double in [0, 1).
double uniform(uint64_t seed, uint64_t draw) {
  uint64_t z = seed + (draw + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

void check(const Sampling& s, size_t vocab) {
  auto bad = [](const std::string& what) { throw Error("[llm::Session::sample] " + what); };
  if (vocab == 0) bad("the logits are empty");
  if (!(s.temperature >= 0))
    bad("temperature " + std::to_string(s.temperature) + ", expected >= 0");
  if (s.top_k < 0) bad("top_k " + std::to_string(s.top_k) + ", expected >= 0");
  if (!(s.top_p > 0 && s.top_p <= 1))
    bad("top_p " + std::to_string(s.top_p) + ", expected in (0, 1]");
  if (!(s.repeat_penalty > 0)) {
    bad("repeat_penalty " + std::to_string(s.repeat_penalty) + ", expected > 0");
  }
}

// llama.cpp's repetition penalty: each distinct id seen has its logit divided by the
// penalty when positive, multiplied when negative.
void penalize_repeats(std::vector<float>& logits, const std::vector<int32_t>& history,
                      double penalty) {
  if (penalty == 1) return;
  std::vector<bool> seen(logits.size(), false);
  for (int32_t id : history) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size() || seen[static_cast<size_t>(id)])
      continue;
    seen[static_cast<size_t>(id)] = true;
    float& l = logits[static_cast<size_t>(id)];
    l = static_cast<float>(l > 0 ? l / penalty : l * penalty);
  }
}

// Sorts ids into `before`'s order (falling logit, rising id on ties) through one 64-bit key
// per id, the logit's bits made to sort as integers in the high half and the id in the low:
// sorting every token of a vocabulary this way takes a third of the time of comparisons that
// read the logits through the ids. The logits hold no NaN.
void sort_by_falling_logit(const std::vector<float>& logits, std::vector<int32_t>& ids) {
  std::vector<uint64_t> keys(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    // + 0.0f makes -0 into +0, which compare equal as floats; then rising bit patterns for
    // rising floats, inverted so that larger logits come first.
    const auto bits = std::bit_cast<uint32_t>(logits[i] + 0.0f);
    const uint32_t rising = bits ^ ((bits >> 31) != 0 ? 0xFFFFFFFFu : 0x80000000u);
    keys[i] = (static_cast<uint64_t>(~rising) << 32) | static_cast<uint32_t>(i);
  }
  std::sort(keys.begin(), keys.end());
  for (size_t i = 0; i < keys.size(); ++i) ids[i] = static_cast<int32_t>(keys[i] & 0xFFFFFFFFu);
}

}  // namespace

int32_t pick_token(std::vector<float> logits, const Sampling& s,
                   const std::vector<int32_t>& history, uint64_t draw) {
  check(s, logits.size());
  // A NaN logit is never picked (and keeps the orderings below strict).
  for (float& l : logits) l = std::isnan(l) ? -INFINITY : l;
  penalize_repeats(logits, history, s.repeat_penalty);
  // Candidates by falling logit, ties by rising id (so greedy takes the first largest).
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  const int32_t best = *std::min_element(order.begin(), order.end(), before);
  if (!std::isfinite(logits[static_cast<size_t>(best)])) {
    throw Error("[llm::Session::sample] no logit is finite (" +
                std::to_string(logits[static_cast<size_t>(best)]) + " is the largest)");
  }
  if (s.temperature == 0) return best;
  const size_t k =
      s.top_k > 0 ? std::min(logits.size(), static_cast<size_t>(s.top_k)) : logits.size();
  if (k == order.size()) {
    sort_by_falling_logit(logits, order);
  } else {
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      before);
    order.resize(k);
  }
  // Softmax at the temperature over the candidates, in double.
  std::vector<double> p(k);
  const double top = logits[static_cast<size_t>(order[0])];
  for (size_t i = 0; i < k; ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(order[i])] - top) / s.temperature);
  }
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  // top-p: the shortest prefix whose probability reaches top_p.
  size_t keep = 0;
  double mass = 0;
  while (keep < k && (keep == 0 || mass < s.top_p * total)) mass += p[keep++];
  const double target = uniform(s.seed, draw) * mass;
  double run = 0;
  for (size_t i = 0; i < keep; ++i) {
    run += p[i];
    if (target < run) return order[i];
  }
  return order[keep - 1];
}

}  // namespace kiln::llm
