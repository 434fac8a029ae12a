// Model::load: a GGUF file's configuration and weights (llm/model_config.h).
#include <memory>
#include <string>

#include "kiln/io.h"
#include "kiln/llm.h"
#include "llm/model_config.h"
#include "llm/model_data.h"

namespace kiln::llm {

Model Model::load(const std::string& gguf_path, Device device) {
  GgufFile file = load_gguf(gguf_path, device);
  const ModelConfig config = read_config(file, gguf_path);
  auto data = std::make_shared<Data>(read_weights(file, config, gguf_path));
  data->device = device;
  return Model(std::move(data));
}

std::string Model::architecture() const { return data_->config.architecture; }
int64_t Model::vocab_size() const { return data_->config.vocab; }
int64_t Model::context_length() const { return data_->config.context; }

}  // namespace kiln::llm
