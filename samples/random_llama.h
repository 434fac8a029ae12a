// A Llama-architecture language model with seeded random weights, as a GGUF file that
// kiln::llm::Model::load reads: what the text-generation and tensor-parallel samples run when
// no trained model is at hand. It has no tokenizer; its ids are bytes.
#ifndef KILN_SAMPLES_RANDOM_LLAMA_H_
#define KILN_SAMPLES_RANDOM_LLAMA_H_

#include <cstdint>

#include "kiln/io.h"
#include "kiln/llm.h"

namespace kiln::samples {

struct RandomLlamaShape {
  int64_t vocab = 256;  // byte-level: a token is a byte
  int64_t dim = 64;     // the residual stream's width
  int64_t layers = 2;
  int64_t heads = 4;     // query heads
  int64_t kv_heads = 2;  // key/value heads; each serves heads / kv_heads query heads
  int64_t hidden = 176;  // the SwiGLU MLP's width
  int64_t context = 128;
  // The dtype of the projection matrices: F32, or a block format (Q8_0, Q4_1, ...) when
  // every matrix's rows are whole blocks.
  DType matrices = DType::F32;
};

// The metadata and tensors of a random model of `shape` (GGUF's llama names and keys,
// docs/llm.md), the same for the same seed.
GgufFile random_llama_gguf(const RandomLlamaShape& shape, uint64_t seed);

// That model loaded by kiln::llm, from a GGUF file written to the temporary folder (its name
// unique to this process) and removed once loaded: the model maps it, and its pages stay
// readable.
llm::Model load_random_llama(const RandomLlamaShape& shape, uint64_t seed);

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_RANDOM_LLAMA_H_
