#!/usr/bin/env bash
# Builds Kiln and runs the demo: batch inference with a small MLP loaded from .safetensors
# (weights written by scripts/make_mlp_weights.py), eager and compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target mlp_inference >/dev/null
python3 scripts/make_mlp_weights.py build/mlp.safetensors
./build/samples/mlp_inference build/mlp.safetensors
