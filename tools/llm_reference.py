#!/usr/bin/env python3
"""A float64 forward of a llama, qwen2 or gemma3 GGUF model in numpy: the tests' reference logits.

Written from the published architectures (Touvron et al. 2023; Qwen2 technical report 2024;
Gemma 3 technical report 2025; ggml's LLM_ARCH_LLAMA, LLM_ARCH_QWEN2 and LLM_ARCH_GEMMA3
graphs), independently of Kiln. The gguf package reads the file and dequantizes every weight;
all arithmetic after that is float64:

    x = token_embd[ids]                                  (gemma3: times sqrt(embedding_length))
    per layer:  x += W_o · attention(rope(W_q · n + b_q), rope(W_k · n + b_k), W_v · n + b_v),
                                                                       n = rms_norm(x)
                x += W_down · (silu(W_gate · n) * (W_up · n)),         n = rms_norm(x)
    logits = output · rms_norm(x)        (output is token_embd when the file has none)

The biases are qwen2's. RoPE turns pairs of a head's dims by position / linear_factor ·
freq_base^(-2j / rope_dim) for pair j: llama files pair (2j, 2j + 1), since llama.cpp's
converter permutes W_q's and W_k's rows for it; qwen2 and gemma3 pair (j, j + rope_dim / 2),
the checkpoint's own layout. A llama file with rope_freqs.weight (Llama 3.1 and 3.2) divides
pair j's frequency by its factor j.

gemma3 differs further (its GGUF norm weights already include Gemma's "1 +"):
- each head's q and k are RMS-normalized (attn_q_norm, attn_k_norm) before RoPE;
- the attention's and the MLP's outputs are RMS-normalized (post_attention_norm,
  post_ffw_norm) before they join x;
- the MLP gates with GELU's tanh approximation instead of silu;
- the head size is attention.key_length, and the scores are scaled by 1/sqrt(head size);
- all but every sixth layer (or as attention.sliding_window_pattern says) slide: a query sees
  only the attention.sliding_window positions up to its own, turned with RoPE base
  rope.freq_base_swa (10000 when absent) and no scaling.

    llm_reference.py MODEL.gguf --ids 1,2,3 [--greedy N] [--out logits.npy] [--round-activations]

--round-activations rounds the input of every product with a block-quantized weight as
Kiln's contract says its CPU kernels do (docs/contracts.md: 8 bits in blocks of 32 along k,
scale max|a| / 127, to nearest): the forward Kiln computes, in float64, which tells the
error that rounding alone causes apart from any other.

prints a JSON object: "greedy", the N tokens a greedy continuation picks (each the argmax of
the logits after the ids and the tokens before it), and "margins", each pick's lead over the
runner-up. --out writes the logits [vocab] of the last prompt position as float64 .npy.
"""

import argparse
import json

import numpy as np
from gguf import GGUFReader, quants


class Model:
    def __init__(self, path, round_activations=False):
        reader = GGUFReader(path)
        self.round_activations = round_activations
        self.quantized = {t.name for t in reader.tensors
                          if t.tensor_type.name not in ("F32", "F16", "BF16", "F64")}
        self.meta = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("tokenizer.")}
        arch = self.meta["general.architecture"]
        if arch not in ("llama", "qwen2", "gemma3"):
            raise SystemExit(f"llm_reference.py: architecture {arch!r} is not llama, qwen2 or gemma3")
        self.gemma = arch == "gemma3"
        self.halves = arch in ("qwen2", "gemma3")
        key = lambda name: self.meta[f"{arch}.{name}"]
        self.layers = int(key("block_count"))
        self.heads = int(key("attention.head_count"))
        self.kv_heads = int(key("attention.head_count_kv"))
        self.eps = float(key("attention.layer_norm_rms_epsilon"))
        self.base = float(self.meta.get(f"{arch}.rope.freq_base", 10000.0))
        linear = self.meta.get(f"{arch}.rope.scaling.type") == "linear"
        self.rope_factor = float(self.meta[f"{arch}.rope.scaling.factor"]) if linear else 1.0
        self.window = int(self.meta.get(f"{arch}.attention.sliding_window", 0)) if self.gemma else 0
        self.local_base = float(self.meta.get(f"{arch}.rope.freq_base_swa", 10000.0))
        pattern = self.meta.get(f"{arch}.attention.sliding_window_pattern", 6)
        if isinstance(pattern, list):
            self.sliding = [bool(p) for p in pattern]
        else:
            self.sliding = [layer % pattern < pattern - 1 for layer in range(self.layers)]
        if not self.window:
            self.sliding = [False] * self.layers
        self.weights = {}
        for t in reader.tensors:
            values = quants.dequantize(np.asarray(t.data), t.tensor_type)
            shape = [int(d) for d in reversed(list(t.shape))]
            self.weights[t.name] = values.astype(np.float64).reshape(shape)
        self.dim = self.weights["token_embd.weight"].shape[1]
        self.head_dim = int(self.meta.get(f"{arch}.attention.key_length", self.dim // self.heads))
        self.rope_dim = int(self.meta.get(f"{arch}.rope.dimension_count", self.head_dim))

    def w(self, name):
        return self.weights[name]

    def product(self, x, name):
        """x @ W.T (+ b when the file has name's bias), with x rounded as Kiln rounds it when
        asked and W is block-quantized."""
        if self.round_activations and name in self.quantized:
            blocks = x.reshape(*x.shape[:-1], -1, 32)
            scale = np.abs(blocks).max(axis=-1, keepdims=True) / 127
            safe = np.where(scale > 0, scale, 1)
            x = (np.round(blocks / safe) * scale).reshape(x.shape)
        out = x @ self.w(name).T
        bias = name.replace(".weight", ".bias")
        return out + self.weights[bias] if bias in self.weights else out

    def rms_norm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def rope(self, x, base, factor, divisors=None):
        """x [T, heads, head_dim] at positions 0 .. T-1: pairs of the first rope_dim dims."""
        tokens = x.shape[0]
        half = self.rope_dim // 2
        freq = base ** (-2.0 * np.arange(half) / self.rope_dim)
        if divisors is not None:
            freq = freq / divisors
        angle = np.arange(tokens)[:, None] / factor * freq[None, :]  # [T, half]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        out = x.copy()
        if self.halves:
            first, second = slice(0, half), slice(half, self.rope_dim)
        else:
            first, second = slice(0, self.rope_dim, 2), slice(1, self.rope_dim, 2)
        a, b = x[..., first], x[..., second]
        out[..., first] = a * cos - b * sin
        out[..., second] = a * sin + b * cos
        return out

    def attention(self, n, layer):
        tokens = n.shape[0]
        p = f"blk.{layer}."
        q = self.product(n, p + "attn_q.weight").reshape(tokens, self.heads, self.head_dim)
        k = self.product(n, p + "attn_k.weight").reshape(tokens, self.kv_heads, self.head_dim)
        v = self.product(n, p + "attn_v.weight").reshape(tokens, self.kv_heads, self.head_dim)
        if self.gemma:
            q = self.rms_norm(q, self.w(p + "attn_q_norm.weight"))
            k = self.rms_norm(k, self.w(p + "attn_k_norm.weight"))
        slides = self.sliding[layer]
        base, factor = (self.local_base, 1.0) if slides else (self.base, self.rope_factor)
        divisors = self.weights.get("rope_freqs.weight")  # llama 3: one factor per pair
        q, k = self.rope(q, base, factor, divisors), self.rope(k, base, factor, divisors)
        group = self.heads // self.kv_heads
        distance = np.arange(tokens)[:, None] - np.arange(tokens)[None, :]  # query - key
        hidden = (distance < 0) | ((distance >= self.window) if slides else False)
        context = np.empty((tokens, self.heads, self.head_dim))
        for h in range(self.heads):
            scores = q[:, h] @ k[:, h // group].T / np.sqrt(self.head_dim)
            scores[hidden] = -np.inf
            scores = np.exp(scores - scores.max(axis=1, keepdims=True))
            context[:, h] = (scores / scores.sum(axis=1, keepdims=True)) @ v[:, h // group]
        return self.product(context.reshape(tokens, self.heads * self.head_dim),
                            p + "attn_output.weight")

    def mlp(self, n, layer):
        p = f"blk.{layer}."
        gate = self.product(n, p + "ffn_gate.weight")
        up = self.product(n, p + "ffn_up.weight")
        if self.gemma:
            active = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate**3)))
        else:
            active = gate / (1.0 + np.exp(-gate))
        return self.product(active * up, p + "ffn_down.weight")

    def logits(self, ids):
        """Logits [T, vocab] of every position."""
        x = self.w("token_embd.weight")[np.asarray(ids)]
        if self.gemma:
            x = x * np.sqrt(self.dim)
        for layer in range(self.layers):
            p = f"blk.{layer}."
            a = self.attention(self.rms_norm(x, self.w(p + "attn_norm.weight")), layer)
            x = x + (self.rms_norm(a, self.w(p + "post_attention_norm.weight")) if self.gemma else a)
            f = self.mlp(self.rms_norm(x, self.w(p + "ffn_norm.weight")), layer)
            x = x + (self.rms_norm(f, self.w(p + "post_ffw_norm.weight")) if self.gemma else f)
        output = "output.weight" if "output.weight" in self.weights else "token_embd.weight"
        return self.product(self.rms_norm(x, self.w("output_norm.weight")), output)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--ids", required=True, help="comma-separated token ids")
    parser.add_argument("--greedy", type=int, default=0)
    parser.add_argument("--out")
    parser.add_argument("--round-activations", action="store_true")
    args = parser.parse_args()
    model = Model(args.model, args.round_activations)
    ids = [int(i) for i in args.ids.split(",")]
    last = model.logits(ids)[-1]
    if args.out:
        np.save(args.out, last)
    greedy, margins = [], []
    logits = last
    for _ in range(args.greedy):
        top2 = np.sort(logits)[-2:]
        greedy.append(int(np.argmax(logits)))
        margins.append(float(top2[1] - top2[0]))
        logits = model.logits(ids + greedy)[-1]
    print(json.dumps({"greedy": greedy, "margins": margins}))


if __name__ == "__main__":
    main()
