// Reading a model's configuration and weights out of a GGUF file's metadata and tensors.
#ifndef KILN_LLM_MODEL_CONFIG_H_
#define KILN_LLM_MODEL_CONFIG_H_

#include <string>

#include "kiln/io.h"
#include "llm/model_data.h"

namespace kiln::llm {

// The configuration of a supported architecture, every key checked; a missing or
// unsupported architecture or key is a kiln::Error naming it and the file.
ModelConfig read_config(const GgufFile& file, const std::string& path);

// The weights the configuration names, each checked for its shape; a missing tensor, or
// one the architecture does not use, is a kiln::Error naming it.
Model::Data read_weights(GgufFile& file, const ModelConfig& config, const std::string& path);

}  // namespace kiln::llm

#endif  // KILN_LLM_MODEL_CONFIG_H_
