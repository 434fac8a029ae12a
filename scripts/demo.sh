#!/usr/bin/env bash
# Builds Kiln and runs the demo: a small eager program, its trace and its result.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target eager_demo >/dev/null
./build/eager_demo
