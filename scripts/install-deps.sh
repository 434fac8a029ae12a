#!/usr/bin/env bash
# Installs the Debian packages Kiln builds with, when any is missing. Safe to run again.
set -euo pipefail
packages=(cmake make g++ libabsl-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libeigen3-dev libhwy-dev
  pkg-config zlib1g-dev python3 python3-pip clang libclang-rt-14-dev ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
