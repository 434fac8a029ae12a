#!/usr/bin/env bash
# Checks the tree for words of a work diary (below), then with clang-format (Google style, 100
# columns) and clang-tidy (.clang-tidy).
# Needs a configured build/ for compile_commands.json (scripts/test.sh makes one).
set -euo pipefail
cd "$(dirname "$0")/.."
# The tree reads as the project's own record, not a work diary: no working sessions, issue or
# item numbers, or lent machines and their device time, in any tracked file. "session" is
# caught as a lowercase word, not inside identifiers or calls (InferenceSession,
# SessionOptions, make_session, session.run(...), session = ...), which name ONNX Runtime's
# sessions; capitalized, Session is kiln::llm's class.
diary='(?<![\w.(])(?-i:s)essions?(?![\w(]|\.\w|\s*=)|\bissue #?[0-9]+|\bitems? [0-9]+|\blent\b'
diary+='|\bdevice (time|minutes?)\b'
found=0
git --no-pager grep -nIiP "$diary" -- . ':!scripts/lint.sh' || found=$?
if ((found == 0)); then
  echo "lint: the lines above name sessions, issue or item numbers, or lent machines" >&2
  exit 1
elif ((found != 1)); then
  echo "lint: git grep -P failed (status $found)" >&2
  exit 1
fi
clang-format --dry-run --Werror $(git ls-files '*.cc' '*.h')
clang-tidy -p build --quiet $(git ls-files 'ops/*.cc' 'jit/*.cc' 'runtime/*.cc' 'runtime/**/*.cc' \
  'tools/*.cc' 'samples/*.cc' 'llm/*.cc') 2>/dev/null | { ! grep -E 'warning:|error:'; }
echo "lint: clean"
