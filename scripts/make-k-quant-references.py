"""Writes tests/data/k_quant_references.gguf: rows of f32 values and the bytes llama.cpp's own
quantizer gives for them in Q4_K, Q5_K and Q6_K, which tests/ops/quantized_blocks_test.cc
holds Kiln's quantizers to, byte for byte.

llama.cpp quantizes whole model files only (llama_model_quantize), so the rows go in as the
weight of a minimal llama-architecture GGUF, quantized "pure" (every weight in the one
format, no importance matrix: the reference quantize_row_*_ref path). The quantizer comes
from the PyPI wheel cyllama (a prebuilt llama.cpp); gguf and numpy write and read the files:

    python3 -m pip install --target /tmp/kq cyllama==0.2.18 gguf==0.19.0 numpy
    PYTHONPATH=/tmp/kq python3 scripts/make-k-quant-references.py tests/data/k_quant_references.gguf
"""
import os
import sys
import tempfile

import gguf
import numpy as np
import cyllama.llama.llama_cpp as llama

ROW = 512  # two super-blocks a row
FTYPES = {"q4_k": 14, "q5_k": 16, "q6_k": 18}  # llama_ftype: Q4_K_S, Q5_K_S, Q6_K


def rows():
    rng = np.random.default_rng(20261207)
    out = [rng.standard_normal(ROW) * s for s in (1.0, 0.02, 300.0)]
    out.append(np.zeros(ROW))                                   # all zero
    out.append(np.full(ROW, 0.75))                              # constant, positive
    out.append(np.full(ROW, -2.5))                              # constant, negative
    out.append(np.abs(rng.standard_normal(ROW)))                # no negative value
    out.append(-np.abs(rng.standard_normal(ROW)))               # no positive value
    spike = rng.standard_normal(ROW) * 0.01
    spike[[3, 300]] = [50.0, -80.0]                             # an outlier per super-block
    out.append(spike)
    mixed = rng.standard_normal(ROW)
    mixed[:32] = 0.0                                            # a zero sub-block among others
    mixed[256:272] = 1e-3
    out.append(mixed)
    out.append(rng.uniform(-1, 1, ROW) * 10.0 ** rng.integers(-6, 4, ROW))  # every magnitude
    return np.stack(out).astype(np.float32)


def model_with(x, path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(64)
    w.add_embedding_length(ROW)
    w.add_block_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tensor("ref.weight", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(out_path):
    llama.disable_logging()
    x = rows()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "f32.gguf")
        model_with(x, source)
        for name, ftype in FTYPES.items():
            params = llama.LlamaModelQuantizeParams()
            params.ftype, params.pure, params.nthread = ftype, True, 1
            target = os.path.join(tmp, name + ".gguf")
            llama.model_quantize(source, target, params)
            tensor = next(t for t in gguf.GGUFReader(target).tensors if t.name == "ref.weight")
            assert tensor.tensor_type.name.lower() == name, tensor.tensor_type.name
            results[name] = (np.array(tensor.data).reshape(-1), tensor.tensor_type)
    w = gguf.GGUFWriter(out_path, "kiln-k-quant-references")
    w.add_string("kiln.source", "llama.cpp quantize_row_*_ref via cyllama 0.2.18, pure")
    w.add_tensor("input", x)
    for name, (data, qtype) in results.items():
        w.add_tensor(name, data.reshape(x.shape[0], -1), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", out_path)


if __name__ == "__main__":
    main(sys.argv[1])
