// The forward of the Llama family (llama, qwen2, gemma3) over a KV cache, recorded with Kiln's
// public ops.
#ifndef KILN_LLM_LLAMA_FORWARD_H_
#define KILN_LLM_LLAMA_FORWARD_H_

#include <cstdint>
#include <vector>

#include "kiln/tensor.h"
#include "llm/model_data.h"

namespace kiln::llm {

// Per layer, keys and values [1, kv_heads, capacity, head_dim]; positions at and past the
// Session's position hold nothing yet.
struct KvCache {
  std::vector<Tensor> keys, values;
  int64_t capacity = 0;
};

KvCache empty_kv_cache(const Model::Data& model, int64_t capacity);

// Runs ids at positions start ... start + ids.size() - 1: records the writes of their keys
// and values into `cache` (its tensors become the pending updated caches) and returns the
// F32 logits [vocab] of the last position. Lazy: evaluate the logits and the cache together.
Tensor llama_forward(const Model::Data& model, KvCache& cache, const std::vector<int32_t>& ids,
                     int64_t start);

}  // namespace kiln::llm

#endif  // KILN_LLM_LLAMA_FORWARD_H_
