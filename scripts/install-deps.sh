#!/usr/bin/env bash
# Installs the Debian packages Kiln builds with, when any is missing. Safe to run again.
set -euo pipefail
packages=(cmake make g++ libabsl-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libeigen3-dev libhwy-dev
  pkg-config zlib1g-dev python3 python3-pip clang libclang-rt-14-dev ccache openmpi-bin
  libopenmpi-dev libopenblas0 liblapack3 libblas3)
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

# cuobjdump, which tests/cuda/machine_code_test.cc disassembles the CUDA kernels with, is not
# in an NVRTC-only toolkit: it comes from PyPI, with the nvdisasm it runs, into a fixed folder
# the test looks in (KILN_CUOBJDUMP overrides). --target, because Debian 12 refuses pip installs
# into the system Python; both wheels at once, because --target does not merge into an
# existing nvidia/ folder.
tools="${HOME}/.cache/kiln/tools/cuobjdump"
if ! compgen -G "${tools}/nvidia/*/bin/cuobjdump" >/dev/null ||
  ! compgen -G "${tools}/nvidia/*/bin/nvdisasm" >/dev/null; then
  echo "kiln: installing cuobjdump and nvdisasm into ${tools}"
  rm -rf "${tools}"
  python3 -m pip install --quiet --target "${tools}" \
    'nvidia-cuda-cuobjdump==13.4.92' 'nvidia-cuda-nvdisasm==13.4.92'
fi

# The gguf Python package (llama.cpp's own reader and writer) and numpy, which the GGUF tests
# write files with and check Kiln's reading against: an independent implementation of the
# format. Hugging Face's tokenizers, which tests/llm/tokenizer_test.cc checks kiln::Tokenizer's
# GPT-2-style ids against; without its dependencies, which only download from the Hub. And
# sentencepiece, which trains the SentencePiece model that test checks the "llama" tokenizer
# against. Into a fixed folder the tests put on PYTHONPATH (KILN_PYTHON_TOOLS overrides).
tools="${HOME}/.cache/kiln/tools/python"
if [[ ! -d "${tools}/gguf" || ! -d "${tools}/numpy" || ! -d "${tools}/tokenizers" ||
  ! -d "${tools}/sentencepiece" ]]; then
  echo "kiln: installing gguf, numpy, tokenizers and sentencepiece (Python) into ${tools}"
  rm -rf "${tools}"
  python3 -m pip install --quiet --target "${tools}" 'gguf==0.19.0' 'numpy==2.4.6' \
    'sentencepiece==0.2.3'
  python3 -m pip install --quiet --no-deps --target "${tools}" 'tokenizers==0.23.3'
fi

# NCCL (libnccl.so.2), which runtime/cuda/nccl.cc opens with dlopen for collectives on CUDA
# tensors, and its nccl.h, which tests/cuda/nccl_test.cc pins Kiln's declarations to. CUDA 13
# toolkits here ship both; where the system has no libnccl.so.2, the PyPI wheel (about 305 MB)
# goes into a fixed folder Kiln looks in after the system's (KILN_NCCL_LIBRARY overrides).
tools="${HOME}/.cache/kiln/tools/nccl"
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2' &&
  [[ ! -f "${tools}/nvidia/nccl/lib/libnccl.so.2" || ! -f "${tools}/nvidia/nccl/include/nccl.h" ]]; then
  echo "kiln: installing NCCL into ${tools}"
  rm -rf "${tools}"
  python3 -m pip install --quiet --target "${tools}" 'nvidia-nccl-cu13==2.32.3'
fi
