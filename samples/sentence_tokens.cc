#include "samples/sentence_tokens.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::samples {

std::vector<int64_t> sentence_token_ids(const Tokenizer& tokenizer, const std::string& text,
                                        size_t max_tokens) {
  const int32_t cls = tokenizer.token_id("[CLS]"), sep = tokenizer.token_id("[SEP]");
  if (cls < 0 || sep < 0) throw Error("the tokenizer has no [CLS] or [SEP] token");
  if (max_tokens < 2) throw Error("max_tokens must leave room for [CLS] and [SEP]");
  const std::vector<int32_t> words = tokenizer.encode(text);
  std::vector<int64_t> ids{cls};
  ids.insert(ids.end(), words.begin(), words.begin() + std::min(words.size(), max_tokens - 2));
  ids.push_back(sep);
  return ids;
}

}  // namespace kiln::samples
