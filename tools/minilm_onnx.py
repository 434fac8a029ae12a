#!/usr/bin/env python3
"""Builds all-MiniLM-L6-v2 as an ONNX graph, for bench/minilm_compare.py to time in ONNX Runtime.

The graph is written op by op with onnx.helper from the same model.safetensors that Kiln
loads (no exporter, no Hugging Face code): token ids and attention mask in, unit-norm
sentence embeddings out (BERT, masked mean pooling, L2 normalization), float32 weights as
initializers, opset 17. After building it checks the graph with onnx.checker and runs the
six sentences of tests/data/minilm_reference.json through ONNX Runtime as one padded batch;
every embedding must be within 1e-5 of the float64 reference.

    python MODEL_DIR OUT.onnx        # e.g. /tmp/venv-bench/bin/python tools/minilm_onnx.py ...

Needs numpy, onnx and onnxruntime, e.g. in a venv:
    python3 -m venv /tmp/venv-bench && /tmp/venv-bench/bin/pip install numpy onnx onnxruntime
onnx and onnxruntime are comparison points for benchmarks only, never a Kiln dependency.
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_reference import read_safetensors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE_JSON = os.path.join(REPO, "tests", "data", "minilm_reference.json")
TOLERANCE = 1e-5
OPSET = 17
IR_VERSION = 8  # the IR version that goes with opset 17; newer ones may be too new for ORT


def load_model(model_dir):
    """(config dict, {name: float32 array}) from a folder of scripts/fetch-minilm.sh."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    return config, {k: v.astype(np.float32) for k, v in weights.items()}


def reference_batch(path=REFERENCE_JSON):
    """The reference sentences as one batch: ids and mask int64 [6, longest], padded with
    [PAD] (id 0, mask 0), and the expected embeddings float64 [6, 384]."""
    with open(path, encoding="utf-8") as f:
        ref = json.load(f)
    rows = ref["token_ids"]
    seq = max(len(r) for r in rows)
    ids = np.zeros((len(rows), seq), np.int64)
    mask = np.zeros((len(rows), seq), np.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return ids, mask, np.array(ref["embeddings"], np.float64)


class _Graph:
    """Collects nodes and initializers; each helper returns the name of its output."""

    def __init__(self):
        self.nodes, self.inits, self._n = [], [], 0

    def _name(self, hint):
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, value, hint="c", dtype=np.float32):
        from onnx import numpy_helper
        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op_type, inputs, hint=None, **attrs):
        from onnx import helper
        out = self._name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out


def build_model(config, W):
    """The sentence encoder as an onnx.ModelProto (see the module doc)."""
    from onnx import TensorProto, helper

    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    dim = hidden // heads
    eps = float(config["layer_norm_eps"])
    g = _Graph()

    def weight(name):
        return g.const(W[name], name)

    def linear(x, prefix):  # weights are stored [out, in]: pre-transpose to [in, out]
        w = g.const(np.ascontiguousarray(W[prefix + ".weight"].T), prefix + ".weight_t")
        return g.op("Add", [g.op("MatMul", [x, w]), weight(prefix + ".bias")])

    def layer_norm(x, prefix):
        return g.op("LayerNormalization", [x, weight(prefix + ".weight"),
                                           weight(prefix + ".bias")], axis=-1, epsilon=eps)

    # Embeddings: word[ids] + position[0:seq] + token_type[0] (all token types are 0).
    seq = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(1, "one", np.int64)],
               "seq_len", axis=0)  # scalar
    positions = g.op("Range", [g.const(0, "zero", np.int64), seq, g.const(1, "one", np.int64)],
                     "positions")
    x = g.op("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], axis=0)
    x = g.op("Add", [x, g.op("Gather", [weight("embeddings.position_embeddings.weight"),
                                        positions], axis=0)])
    x = g.op("Add", [x, g.const(W["embeddings.token_type_embeddings.weight"][0],
                                "token_type_0")])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Additive attention bias [batch, 1, 1, seq]: 0 for real tokens, -1e9 for padding.
    mask = g.op("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", [g.const(1.0, "one_f"), mask]), g.const(-1e9, "neg_big")])
    bias = g.op("Unsqueeze", [bias, g.const([1, 2], "axes12", np.int64)], "mask_bias")

    split_shape = g.const([0, 0, heads, dim], "split_shape", np.int64)  # 0: keep that dim
    merge_shape = g.const([0, 0, hidden], "merge_shape", np.int64)
    scale = g.const(1.0 / math.sqrt(dim), "scale")
    sqrt2, one, half = g.const(math.sqrt(2.0), "sqrt2"), g.const(1.0, "one"), g.const(0.5, "half")

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"

        def heads_of(name, perm):  # [b, s, hidden] -> [b, heads, s, dim] (perm permutes)
            y = g.op("Reshape", [linear(x, f"{p}.attention.self.{name}"), split_shape])
            return g.op("Transpose", [y], perm=perm)

        q = heads_of("query", [0, 2, 1, 3])
        k_t = heads_of("key", [0, 2, 3, 1])  # [b, heads, dim, s]
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k_t]), scale]), bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape])
        x = layer_norm(g.op("Add", [linear(ctx, f"{p}.attention.output.dense"), x]),
                       f"{p}.attention.output.LayerNorm")
        h = linear(x, f"{p}.intermediate.dense")
        # Exact GELU, 0.5 * h * (1 + erf(h / sqrt(2))), in the form ORT's GELU fusion knows.
        h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [g.op("Erf", [g.op("Div", [h, sqrt2])]),
                                                     one])]), half], "gelu")
        x = layer_norm(g.op("Add", [linear(h, f"{p}.output.dense"), x]),
                       f"{p}.output.LayerNorm")

    # Masked mean over tokens (count clamped at 1e-9 as sentence-transformers does), then
    # x / max(||x||, 1e-12) as torch.nn.functional.normalize does.
    axis1 = g.const([1], "axis1", np.int64)
    m = g.op("Unsqueeze", [mask, g.const([2], "axis2", np.int64)])  # [b, s, 1]
    summed = g.op("ReduceSum", [g.op("Mul", [x, m]), axis1], keepdims=0)  # [b, hidden]
    count = g.op("Max", [g.op("ReduceSum", [mask, axis1], keepdims=1), g.const(1e-9, "tiny")])
    pooled = g.op("Div", [summed, count], "pooled")
    norm = g.op("Max", [g.op("ReduceL2", [pooled], axes=[1], keepdims=1),
                        g.const(1e-12, "norm_eps")])
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embeddings"], name="normalize"))

    graph = helper.make_graph(
        g.nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", hidden])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln tools/minilm_onnx.py")
    model.ir_version = IR_VERSION
    return model


def make_session(path, threads=2):
    """An ORT CPU InferenceSession as the benchmark uses it (the check uses the same settings)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def check_session(session):
    """Largest |ORT - reference| over the six reference sentences, run as one padded batch."""
    ids, mask, expected = reference_batch()
    (got,) = session.run(["embeddings"], {"input_ids": ids, "attention_mask": mask})
    return float(np.abs(got.astype(np.float64) - expected).max())


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import onnx
    model_dir, out_path = sys.argv[1:]
    model = build_model(*load_model(model_dir))
    onnx.checker.check_model(model)
    onnx.save(model, out_path)
    onnx.checker.check_model(out_path)  # the saved file too (by path: no 2 GB proto limit)
    diff = check_session(make_session(out_path))
    ok = diff <= TOLERANCE
    print(f"{out_path}: onnx.checker ok; ONNX Runtime vs float64 reference on "
          f"{len(reference_batch()[0])} sentences: max |diff| = {diff:.3g} "
          f"({'within' if ok else 'OVER'} {TOLERANCE:g})")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
