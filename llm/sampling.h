// Picking the next token from a position's logits (Sampling's rules, include/kiln/llm.h).
#ifndef KILN_LLM_SAMPLING_H_
#define KILN_LLM_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "kiln/llm.h"

namespace kiln::llm {

// The token Sampling `s` picks from `logits` after the ids of `history`. `draw` numbers the
// draws of one Session (0, 1, ...): the uniform value a draw uses depends only on s.seed and
// draw, so the same seed and logits give the same tokens.
int32_t pick_token(std::vector<float> logits, const Sampling& s,
                   const std::vector<int32_t>& history, uint64_t draw);

}  // namespace kiln::llm

#endif  // KILN_LLM_SAMPLING_H_
