#!/usr/bin/env bash
# Checks the tree with clang-format (Google style, 100 columns) and clang-tidy (.clang-tidy).
# Needs a configured build/ for compile_commands.json (scripts/test.sh makes one).
set -euo pipefail
cd "$(dirname "$0")/.."
clang-format --dry-run --Werror $(git ls-files '*.cc' '*.h')
clang-tidy -p build --quiet $(git ls-files 'ops/*.cc' 'jit/*.cc' 'runtime/*.cc' 'runtime/**/*.cc' \
  'tools/*.cc' 'samples/*.cc') 2>/dev/null | { ! grep -E 'warning:|error:'; }
echo "lint: clean"
