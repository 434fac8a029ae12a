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

// The model with the encoder's linear weights (attention's query, key, value and output, the
// MLP's two) quantized to block dtype `format` (Q8_0, say): each linear then runs as a
// quantized matrix product. Embeddings, norms and biases stay f32.
MiniLM quantize_linear_weights(MiniLM model, DType format);

// The encoder's input [batch, tokens, hidden] for token ids [batch, tokens] (I64): word,
// position and token-type embeddings summed, then layer-normed.
Tensor embed_tokens(const MiniLM& model, const Tensor& ids);

// Token id rows padded with 0 to the longest: ids [rows, tokens] (I64) and a mask of the
// same shape (F32: 1 for a token, 0 for padding).
struct PaddedRows {
  Tensor ids, mask;
};
PaddedRows pad_rows(const std::vector<std::vector<int64_t>>& rows);

// The embeddings [rows, hidden] of padded rows: the padding is masked out of the attention
// and of the mean. A function of tensors only, so kiln::compile can replay it for new ids
// and masks of the same shape (bench/minilm_bench.cc, samples/sentence_embeddings.cc).
Tensor embed_padded(const MiniLM& model, const Tensor& ids, const Tensor& mask);

// embed_padded through kiln::compile: called with {ids, mask}, it returns {embeddings},
// recording once per shape and replaying after. It reads `model` whenever it records, so
// the model must outlive it.
Compiled compile_embed_padded(const MiniLM& model);

// The embeddings [sentences, hidden] of token id rows (sentence_token_ids), one row
// per sentence: embed_padded of pad_rows.
Tensor embed_sentences(const MiniLM& model, const std::vector<std::vector<int64_t>>& ids);

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_MINILM_H_
