#!/usr/bin/env bash
# Installs the Kiln build in $1 into a fresh prefix, then configures, builds and runs the
# outside project in this folder against it with find_package(kiln).
set -euo pipefail
build_dir=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/kiln/kiln.h"
test -f "$work/prefix/lib/cmake/kiln/kilnConfig.cmake"
cmake -S "$here" -B "$work/app" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app" -j2 >/dev/null
"$work/app/app"
