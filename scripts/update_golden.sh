#!/usr/bin/env bash
# Rewrites the golden texts of the compiler's passes (tests/passes/golden/*.txt) from what
# the current tree prints, then shows which changed: review `git diff tests/passes/golden`
# as part of the change that moved them (tests/passes/pass_golden_test.cc says what they hold).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target kiln_tests -j"$(nproc)"
KILN_UPDATE_GOLDEN=1 build/tests/kiln_tests --gtest_filter='Passes/PassGolden.*' --gtest_brief=1
git --no-pager diff --stat -- tests/passes/golden
