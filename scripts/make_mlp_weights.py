#!/usr/bin/env python3
"""Writes the weights of the mlp_inference sample: a 2-layer MLP as a .safetensors file.

Standard library only (no numpy, no safetensors package), so it runs on a bare machine:
    python3 scripts/make_mlp_weights.py OUT.safetensors [--in 64 --hidden 256 --out 10]

The format: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian data. Weights are drawn from a fixed seed
(He-style scaling), so every run writes the same file.
"""
import argparse
import json
import math
import random
import struct


def tensor(rng, shape, scale):
    count = math.prod(shape)
    return shape, [rng.gauss(0.0, scale) for _ in range(count)]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--in", dest="inputs", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--out", dest="outputs", type=int, default=10)
    args = parser.parse_args()

    rng = random.Random(2026)
    tensors = {
        "fc1.weight": tensor(rng, [args.inputs, args.hidden], math.sqrt(2.0 / args.inputs)),
        "fc1.bias": tensor(rng, [args.hidden], 0.01),
        "fc2.weight": tensor(rng, [args.hidden, args.outputs], math.sqrt(2.0 / args.hidden)),
        "fc2.bias": tensor(rng, [args.outputs], 0.01),
    }
    header = {"__metadata__": {"model": "kiln mlp_inference sample", "layout": "x @ weight + bias"}}
    data = bytearray()
    for name, (shape, values) in tensors.items():
        begin = len(data)
        data += struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [begin, len(data)]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    with open(args.path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)
    print(f"wrote {args.path}: {', '.join(f'{n} {s}' for n, (s, _) in tensors.items())}")


if __name__ == "__main__":
    main()
