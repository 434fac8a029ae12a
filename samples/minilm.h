// all-MiniLM-L6-v2, the sentence encoder, on Kiln's public API: a 6-layer BERT whose mean-
// pooled, L2-normalized output is a sentence embedding (sentence-transformers' recipe).
#ifndef KILN_SAMPLES_MINILM_H_
#define KILN_SAMPLES_MINILM_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::samples {

struct MiniLM {
  std::map<std::string, Tensor> weights;  // as model.safetensors names them
  int64_t layers = 0, hidden = 0, heads = 0;
  double eps = 1e-12;  // layer_norm_eps

  const Tensor& w(const std::string& name) const;  // throws kiln::Error naming a missing one
};

// Reads DIR/model.safetensors and DIR/config.json (scripts/fetch-minilm.sh puts them there).
MiniLM load_minilm(const std::string& dir);

// The encoder's input [batch, tokens, hidden] for token ids [batch, tokens] (I64): word,
// position and token-type embeddings summed, then layer-normed.
Tensor embed_tokens(const MiniLM& model, const Tensor& ids);

// The embeddings [sentences, hidden] of token id rows (BertTokenizer::encode), one row
// per sentence. Rows of different lengths are padded; the padding is masked out of the
// attention and of the mean.
Tensor embed_sentences(const MiniLM& model, const std::vector<std::vector<int64_t>>& ids);

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_MINILM_H_
