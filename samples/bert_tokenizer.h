// BERT's uncased WordPiece tokenizer, as all-MiniLM-L6-v2 uses it: text in, token ids out.
#ifndef KILN_SAMPLES_BERT_TOKENIZER_H_
#define KILN_SAMPLES_BERT_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::samples {

class BertTokenizer {
 public:
  // Reads vocab.txt (one token per line; the line number is its id). Throws kiln::Error
  // when the file is missing or lacks [CLS], [SEP] or [UNK].
  static BertTokenizer load(const std::string& vocab_path);

  // [CLS] word pieces [SEP], at most max_tokens in all (longer text is cut).
  //  - Clean: control characters dropped, every space character becomes ' '.
  //  - CJK ideographs become words of their own.
  //  - Lowercase and strip accents: Latin, Greek and Cyrillic letters fold as Unicode NFD
  //    does (samples/unicode_fold.inc); other scripts pass as they are.
  //  - Punctuation splits off as tokens of its own.
  //  - WordPiece: the longest vocabulary prefix first, continuations spelled "##...";
  //    a word that does not split, or of more than 100 characters, is [UNK].
  std::vector<int64_t> encode(const std::string& text, size_t max_tokens = 256) const;

 private:
  void add_word_pieces(const std::string& word, std::vector<int64_t>& ids) const;

  std::unordered_map<std::string, int64_t> vocab_;
  int64_t cls_ = 0, sep_ = 0, unk_ = 0;
};

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_BERT_TOKENIZER_H_
