// Model::load: a GGUF file's configuration and weights (llm/model_config.h), its tokenizer
// and chat template.
#include <memory>
#include <string>
#include <string_view>

#include "kiln/error.h"
#include "kiln/io.h"
#include "kiln/llm.h"
#include "llm/model_config.h"
#include "llm/model_data.h"
#include "llm/tensor_parallel.h"

namespace kiln::llm {
namespace {

// The tokens that end an assistant's turn: EOS and the end-of-turn markers of the common
// chat formats, where the vocabulary has them as control tokens.
std::vector<int32_t> end_of_turn_ids(const Tokenizer& t) {
  std::vector<int32_t> ids;
  if (t.eos() >= 0) ids.push_back(t.eos());
  for (const char* text : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"}) {
    const int32_t id = t.token_id(text);
    if (id >= 0 && t.is_control(id) && id != t.eos()) ids.push_back(id);
  }
  return ids;
}

// The configuration, the weights (this rank's share of them with `tensor_parallel`), the
// tokenizer and the chat template.
std::shared_ptr<Model::Data> load_data(const std::string& gguf_path,
                                       const distributed::Group* tensor_parallel, Device device) {
  if (device.type != DeviceType::CPU) {
    throw Error("[llm::Model::load] " + device_name(device) +
                ": Sessions run on the CPU only for now (docs/llm.md)");
  }
  GgufFile file = load_gguf(gguf_path, device);
  const ModelConfig config = read_config(file, gguf_path);
  auto data = std::make_shared<Model::Data>(read_weights(file, config, gguf_path));
  data->device = device;
  if (tensor_parallel != nullptr) keep_tensor_parallel_share(*data, *tensor_parallel, gguf_path);
  // A tokenizer Kiln cannot read (WordPiece, T5's Unigram) leaves the model usable with ids.
  if (file.metadata.count("tokenizer.ggml.tokens")) {
    try {
      data->tokenizer = Tokenizer::from_gguf(file);
      data->end_of_turn = end_of_turn_ids(*data->tokenizer);
    } catch (const Error& e) {
      data->tokenizer_error = e.what();
    }
  } else {
    data->tokenizer_error = "the file has no tokenizer (tokenizer.ggml.tokens)";
  }
  if (auto it = file.metadata.find("tokenizer.chat_template"); it != file.metadata.end()) {
    data->chat_template = it->second.as_string();
  }
  return data;
}

}  // namespace

Model Model::load(const std::string& gguf_path, Device device) {
  return Model(load_data(gguf_path, nullptr, device));
}

Model Model::load(const std::string& gguf_path, const distributed::Group& tensor_parallel,
                  Device device) {
  return Model(load_data(gguf_path, &tensor_parallel, device));
}

const Tokenizer& tokenizer_of(const Model::Data& model, const std::string& caller) {
  if (!model.tokenizer) throw Error("[" + caller + "] " + model.tokenizer_error);
  return *model.tokenizer;
}

std::vector<int32_t> prompt_ids(const Model::Data& model, std::string_view text, bool at_start,
                                const std::string& caller) {
  const Tokenizer& t = tokenizer_of(model, caller);
  std::vector<int32_t> ids = t.encode(text);
  if (at_start && t.add_bos() && t.bos() >= 0) ids.insert(ids.begin(), t.bos());
  return ids;
}

const Tokenizer& Model::tokenizer() const { return tokenizer_of(*data_, "llm::Model::tokenizer"); }

std::vector<int32_t> Model::prompt_ids(std::string_view text, bool at_start) const {
  return llm::prompt_ids(*data_, text, at_start, "llm::Model::prompt_ids");
}

namespace {

// Gemma's turns (<start_of_turn>user ... <end_of_turn>, then <start_of_turn>model), which
// have no system turn: BOS, which its template writes first, comes from prompt_ids.
std::string gemma_chat_prompt(std::string_view user_message, bool first_turn) {
  std::string prompt = first_turn ? "" : "<end_of_turn>\n";
  prompt.append("<start_of_turn>user\n").append(user_message);
  return prompt + "<end_of_turn>\n<start_of_turn>model\n";
}

}  // namespace

std::string Model::chat_prompt(std::string_view user_message, bool first_turn) const {
  const std::string& t = data_->chat_template;
  if (t.find("<start_of_turn>") != std::string::npos) {
    return gemma_chat_prompt(user_message, first_turn);
  }
  if (t.find("<|im_start|>") == std::string::npos) {
    throw Error(t.empty() ? "[llm::Model::chat_prompt] the file has no tokenizer.chat_template"
                          : "[llm::Model::chat_prompt] the chat template is neither ChatML "
                            "(<|im_start|>) nor Gemma's (<start_of_turn>), the formats Kiln "
                            "applies");
  }
  std::string user = "<|im_start|>user\n";
  user.append(user_message).append("<|im_end|>\n<|im_start|>assistant\n");
  // A later turn first closes the assistant's answer: generate stops at its end-of-turn token
  // without running it.
  if (!first_turn) return "<|im_end|>\n" + user;
  // The template's own default system turn, when it writes one, is its literal text from
  // "<|im_start|>system\n" to the next "<|im_end|>": the first such turn that is plain text,
  // since a turn spliced from the messages ("' + message['content']") is the template's code,
  // not a default.
  const std::string system = "<|im_start|>system\n";
  for (size_t at = t.find(system); at != std::string::npos; at = t.find(system, at + 1)) {
    const size_t end = t.find("<|im_end|>", at);
    if (end == std::string::npos) break;
    const std::string turn = t.substr(at, end - at);
    if (turn.find_first_of("'\"{}") == std::string::npos) {
      std::string prompt = turn;
      prompt.append("<|im_end|>\n").append(user);
      return prompt;
    }
  }
  return user;
}

std::string Model::architecture() const { return data_->config.architecture; }
int64_t Model::vocab_size() const { return data_->config.vocab; }
int64_t Model::context_length() const { return data_->config.context; }

}  // namespace kiln::llm
