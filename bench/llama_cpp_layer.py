"""llama.cpp's prompt processing of one layer of a llama-style model, beside Kiln's
BM_LayerProducts (bench/quantized_matmul_bench.cc): hidden size 2048, MLP size 5632, 32 heads,
a 4096-token vocabulary, weights quantized "pure" to Q4_K or Q8_0 by llama.cpp itself.

One llama_decode of M tokens (M = 128 and 512) on 2 threads is the whole layer: embedding,
norms, the seven matrix products, attention and the last token's logits. Its time is an
upper bound on the products', so Kiln's products alone beating it beats llama.cpp's products.
llama.cpp comes from the PyPI wheel cyllama (a prebuilt llama.cpp), a comparison point only:

    python3 -m pip install --target /tmp/kq cyllama==0.2.18 gguf==0.19.0 numpy
    PYTHONPATH=/tmp/kq python3 bench/llama_cpp_layer.py [--reps 5]
"""
import argparse
import os
import statistics
import tempfile
import time

import gguf
import numpy as np
import cyllama.llama.llama_cpp as llama

HIDDEN, MLP, HEADS, VOCAB = 2048, 5632, 32, 4096
FTYPES = {"q4_k": 14, "q8_0": 7}  # llama_ftype: Q4_K_S and Q8_0, quantized pure


def write_f32_model(path):
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(1)
    w.add_feed_forward_length(MLP)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"t{i}" for i in range(VOCAB - len(tokens))]
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (VOCAB - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def weight(rows, cols):
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)

    w.add_tensor("token_embd.weight", weight(VOCAB, HIDDEN))
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    w.add_tensor("output.weight", weight(VOCAB, HIDDEN))
    for name, shape in [("attn_q", (HIDDEN, HIDDEN)), ("attn_k", (HIDDEN, HIDDEN)),
                        ("attn_v", (HIDDEN, HIDDEN)), ("attn_output", (HIDDEN, HIDDEN)),
                        ("ffn_gate", (MLP, HIDDEN)), ("ffn_up", (MLP, HIDDEN)),
                        ("ffn_down", (HIDDEN, MLP))]:
        w.add_tensor(f"blk.0.{name}.weight", weight(*shape))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(HIDDEN, np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(HIDDEN, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def time_prompt(path, tokens, reps):
    params = llama.LlamaModelParams()
    params.n_gpu_layers = 0
    model = llama.LlamaModel(path, params)
    cp = llama.LlamaContextParams()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = tokens
    cp.n_threads = cp.n_threads_batch = 2
    ctx = llama.LlamaContext(model, cp)
    ids = [3 + (i * 7) % 250 for i in range(tokens)]
    times = []
    for r in range(reps + 1):  # the first call allocates and repacks: not timed
        ctx.kv_cache_clear()
        batch = llama.LlamaBatch(n_tokens=tokens, embd=0, n_seq_max=1)
        batch.set_batch(ids, n_past=0, logits_all=False)
        start = time.perf_counter()
        ctx.decode(batch)
        ctx.synchronize()
        if r:
            times.append((time.perf_counter() - start) * 1e3)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    llama.disable_logging()
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "layer_f32.gguf")
        write_f32_model(source)
        print("| llama.cpp (cyllama 0.2.18), one layer | M | median ms | min ms | GFLOP/s of the products |")
        print("|---|---|---|---|---|")
        for name, ftype in FTYPES.items():
            target = os.path.join(tmp, f"layer_{name}.gguf")
            params = llama.LlamaModelQuantizeParams()
            params.ftype, params.pure, params.nthread = ftype, True, 2
            llama.model_quantize(source, target, params)
            for tokens in (128, 512):
                t = time_prompt(target, tokens, args.reps)
                flops = 2.0 * tokens * (4 * HIDDEN * HIDDEN + 3 * HIDDEN * MLP)
                print(f"| {name} | {tokens} | {statistics.median(t):.2f} | {min(t):.2f} | "
                      f"{flops / statistics.median(t) / 1e6:.0f} |")


if __name__ == "__main__":
    main()
