// `kiln generate`: text from a GGUF language model through kiln::llm.
#ifndef KILN_TOOLS_GENERATE_COMMAND_H_
#define KILN_TOOLS_GENERATE_COMMAND_H_

namespace kiln::tools {

// kiln generate --model M.gguf --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K]
//   [--top-p P] [--repeat-penalty R] [--seed S] [--chat] [--threads N] [--logits-out F.npy]
// argv[0] is "generate". Streams the text to stdout, then prints one line
// "prefill: <n> tokens, <ms> ms; decode: <n> tokens, <tok/s> tok/s". Returns the exit
// status: 2 for a usage error; a kiln::Error propagates.
int generate_command(int argc, char** argv);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_GENERATE_COMMAND_H_
