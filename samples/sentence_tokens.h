// The token ids all-MiniLM-L6-v2 reads for a sentence, from the WordPiece tokenizer of its
// tokenizer.json (kiln::Tokenizer, in kiln::llm) and the [CLS] and [SEP] tokens BERT wants.
#ifndef KILN_SAMPLES_SENTENCE_TOKENS_H_
#define KILN_SAMPLES_SENTENCE_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/tokenizer.h"

namespace kiln::samples {

// [CLS], the ids of `text`, [SEP]: at most max_tokens in all, the text's ids cut to fit
// (sentence-transformers cuts at the model's max_seq_length, 256). kiln::Tokenizer::encode
// adds no special tokens, so this does, as tokenizer.json's post_processor says. Throws
// kiln::Error when the tokenizer has no [CLS] or [SEP], or max_tokens is below 2.
std::vector<int64_t> sentence_token_ids(const Tokenizer& tokenizer, const std::string& text,
                                        size_t max_tokens = 256);

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_SENTENCE_TOKENS_H_
