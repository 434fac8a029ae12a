#!/usr/bin/env python3
"""Float64 numpy reference for the sentence encoder all-MiniLM-L6-v2.

Independent of Kiln and of the Hugging Face stack (numpy only): the tokenizer, the
safetensors reader and the BERT encoder are written here from their definitions, so
a C++ test can check samples/sentence_embeddings.cc against numbers no shared code
produced.

    python3 tools/minilm_reference.py MODEL_DIR OUT.json

MODEL_DIR holds model.safetensors, vocab.txt and config.json (scripts/fetch-minilm.sh).
"""
import json
import math
import os
import struct
import sys
import unicodedata

import numpy as np

SENTENCES = [
    "Kiln compiles tensor programs at run time.",
    "A JIT compiler turns array code into fused kernels.",
    "The cat sat on the mat.",
    "A dog is playing in the park!",
    "Café déjà vu: naïve coöperation, ¿sí?",
    "unbelievably tokenization-heavy words like antidisestablishmentarianism",
]

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json: longer inputs are cut, [CLS]/[SEP] included
MAX_WORD_CHARS = 100  # WordPiece gives up on longer words and emits [UNK]


# --- safetensors -----------------------------------------------------------------

def _decode(dtype, raw):
    if dtype == "BF16":  # bfloat16 is the top half of a float32
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    kinds = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
             "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
    return np.frombuffer(raw, kinds[dtype])


def read_safetensors(path):
    """{name: float64 array}: 8-byte LE header length, JSON header, then raw LE data."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    body = data[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        values = _decode(info["dtype"], body[begin:end])
        tensors[name] = values.astype(np.float64).reshape(info["shape"])
    return tensors


# --- tokenizer (uncased BERT: BasicTokenizer, then WordPiece) --------------------

def read_vocab(path):
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n"): i for i, line in enumerate(f)}


def _is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch):
    # Tab, newline and return count as whitespace, not as control characters.
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch):
    # BERT treats all non-alphanumeric ASCII (e.g. "$", "^", "`") as punctuation,
    # though Unicode files some of it under symbols.
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    # The CJK Unified Ideographs blocks; other scripts (kana, hangul) are left alone.
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F
            or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def _clean(text):
    out = []
    for ch in text:
        if ord(ch) in (0, 0xFFFD) or _is_control(ch):
            continue
        if _is_cjk(ord(ch)):
            out.append(f" {ch} ")  # each ideograph is a word of its own
        else:
            out.append(" " if _is_whitespace(ch) else ch)
    return "".join(out)


def _strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")


def _split_punctuation(word):
    pieces, current = [], ""
    for ch in word:
        if _is_punctuation(ch):
            if current:
                pieces.append(current)
            pieces.append(ch)
            current = ""
        else:
            current += ch
    return pieces + [current] if current else pieces


def basic_tokenize(text):
    words = []
    for word in _clean(text).split():
        words.extend(_split_punctuation(_strip_accents(word.lower())))
    return words


def wordpiece(word, vocab):
    """Greedy longest match first; a word with any unmatched rest becomes [UNK]."""
    if len(word) > MAX_WORD_CHARS:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def tokenize(text, vocab):
    pieces = [p for w in basic_tokenize(text) for p in wordpiece(w, vocab)]
    pieces = ["[CLS]"] + pieces[:MAX_SEQ_LENGTH - 2] + ["[SEP]"]
    return [vocab[p] for p in pieces]


# --- encoder ---------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)  # biased, as torch computes it
    return (x - mean) / np.sqrt(var + eps) * w + b


def linear(x, W, prefix):
    return x @ W[prefix + ".weight"].T + W[prefix + ".bias"]  # weights are [out, in]


def attention(x, W, prefix, heads):
    seq, hidden = x.shape
    dim = hidden // heads

    def split(name):  # [seq, hidden] -> [heads, seq, dim]
        return linear(x, W, f"{prefix}.{name}").reshape(seq, heads, dim).transpose(1, 0, 2)

    q, k, v = split("query"), split("key"), split("value")
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(dim)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    return (probs @ v).transpose(1, 0, 2).reshape(seq, hidden)


def bert_layer(x, W, i, config):
    p, eps = f"encoder.layer.{i}", config["layer_norm_eps"]
    a = attention(x, W, f"{p}.attention.self", config["num_attention_heads"])
    x = layer_norm(linear(a, W, f"{p}.attention.output.dense") + x,
                   W[f"{p}.attention.output.LayerNorm.weight"],
                   W[f"{p}.attention.output.LayerNorm.bias"], eps)
    h = gelu(linear(x, W, f"{p}.intermediate.dense"))
    return layer_norm(linear(h, W, f"{p}.output.dense") + x,
                      W[f"{p}.output.LayerNorm.weight"], W[f"{p}.output.LayerNorm.bias"], eps)


def encode(ids, W, config):
    """Unit-norm sentence embedding: BERT, mean over every token, L2 normalization."""
    x = (W["embeddings.word_embeddings.weight"][ids]
         + W["embeddings.position_embeddings.weight"][:len(ids)]
         + W["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"],
                   config["layer_norm_eps"])
    for i in range(config["num_hidden_layers"]):
        x = bert_layer(x, W, i, config)
    pooled = x.mean(0)  # one unpadded sentence: the attention mask is all ones
    return pooled / np.linalg.norm(pooled)


# --- output ----------------------------------------------------------------------

def _floats(values):
    return "[" + ", ".join(format(float(v), ".9g") for v in values) + "]"


def _rows(rows, fmt):
    return "[\n    " + ",\n    ".join(fmt(r) for r in rows) + "\n  ]"


def write_json(path, sentences, token_ids, embeddings, similarity):
    # Written by hand so each array sits on one line and floats keep 9 digits.
    text = ("{\n"
            '  "model": "all-MiniLM-L6-v2",\n'
            f'  "sentences": {_rows(sentences, lambda s: json.dumps(s, ensure_ascii=False))},\n'
            f'  "token_ids": {_rows(token_ids, json.dumps)},\n'
            f'  "embeddings": {_rows(embeddings, _floats)},\n'
            f'  "similarity": {_rows(similarity, _floats)}\n'
            "}\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model_dir, out_path = sys.argv[1:]
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    vocab = read_vocab(os.path.join(model_dir, "vocab.txt"))
    W = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    token_ids = [tokenize(s, vocab) for s in SENTENCES]
    embeddings = np.stack([encode(ids, W, config) for ids in token_ids])
    similarity = embeddings @ embeddings.T  # rows are unit vectors: this is the cosine
    write_json(out_path, SENTENCES, token_ids, embeddings, similarity)


if __name__ == "__main__":
    main()
