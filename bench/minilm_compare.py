#!/usr/bin/env python3
"""ONNX Runtime and PyTorch timings of all-MiniLM-L6-v2 on the CPU, beside bench/minilm_bench.cc.

The engines run the same sentence encoder (BERT, masked mean pooling, L2 normalization)
from the same model.safetensors at the shapes Kiln's benchmark uses, batch 8 x 64 tokens
and 1 x 16, with the same token ids:
    ids[b][s] = 101 if s == 0, 102 if s == seq-1, else 1000 + ((b*seq + s)*37) % 29000
and an all-ones attention mask. ONNX Runtime also runs the graph with its MatMul weights
quantized by onnxruntime.quantization.quantize_dynamic (int8), beside Kiln with Q8_0 weights
(BM_MiniLMQ8Compiled); ONNX Runtime's int8 graph is checked by cosine to the reference
(reported, and >= 0.9 for every sentence) instead of 1e-5. Kiln is timed in its process: the eager forward
(BM_MiniLM, recording every op on each call) and the same forward through kiln::compile
(BM_MiniLMCompiled, replaying the recorded plan), the way an application serving requests
of one shape would run it. Each engine runs in a process of its own (no shared thread
pools) on 2 threads: ONNX Runtime with intra_op_num_threads=2, inter_op_num_threads=1,
ORT_ENABLE_ALL and the CPU provider, on the graph tools/minilm_onnx.py builds; PyTorch eager
with torch.set_num_threads(2) under torch.inference_mode(). Before timing, each engine's
embeddings of tests/data/minilm_reference.json's sentences must be within 1e-5 of the
float64 reference. Per engine and shape: 3 warm-up calls, then --calls timed calls; with
--rounds R the engines take turns R times (so the machine's slow minutes fall on each of
them) and the calls of every round are pooled; a markdown table gives the median and min.

    python bench/minilm_compare.py MODEL_DIR [--onnx PATH] [--calls 11] [--rounds 1]
        [--ort-python PY] [--torch-python PY] [--kiln build/bench/minilm_bench]

MODEL_DIR is the folder scripts/fetch-minilm.sh prints. Without --onnx the graph is built
into /tmp first. Each engine runs under the interpreter given for it; by default the one
running this script if it imports the engine's package, else /usr/bin/python3 if that does,
else the engine is skipped. Debian's torch calls whatever libblas.so.3 resolves to (the slow
reference BLAS unless OpenBLAS is installed); the output names the BLAS library torch loaded.
A setup that works on Debian 12:
    python3 -m venv /tmp/venv-bench && /tmp/venv-bench/bin/pip install numpy onnx onnxruntime
    apt-get install -y python3-torch python3-numpy    # PyTorch for /usr/bin/python3
    /tmp/venv-bench/bin/python bench/minilm_compare.py "$(scripts/fetch-minilm.sh)"
onnxruntime and torch are comparison points for this benchmark only, never a Kiln dependency.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

SHAPES = [(8, 64), (1, 16)]
WARMUP = 3
TOLERANCE = 1e-5
ENGINES = {"ort": ("onnxruntime", "ONNX Runtime"),
           "ort_int8": ("onnxruntime", "ONNX Runtime int8 (quantize_dynamic)"),
           "torch": ("torch", "PyTorch")}
# The quantized engine is checked by cosine to the reference (every sentence), not 1e-5: it
# reports its lowest cosine (Kiln's q8_0 weights must keep 0.99, tests/samples/samples_test.cc)
# and stops only under INT8_BROKEN.
INT8_BROKEN = 0.9


def bench_ids(batch, seq):
    """The token ids Kiln's benchmark uses; returned as nested lists."""
    return [[101 if s == 0 else 102 if s == seq - 1 else 1000 + ((b * seq + s) * 37) % 29000
             for s in range(seq)] for b in range(batch)]


def time_calls(fn, calls):
    """(every call's ms, last output) over `calls` timed calls after WARMUP untimed ones."""
    for _ in range(WARMUP):
        out = fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times, out


# --- engines (each runs in a child process: `--engine NAME`) ---------------------

def run_ort(args):
    import numpy as np
    import onnxruntime as ort
    from minilm_onnx import check_session, make_session

    session = make_session(args.onnx, threads=2)
    info = {"version": f"onnxruntime {ort.__version__}", "check": check_session(session)}
    for batch, seq in SHAPES:
        ids = np.array(bench_ids(batch, seq), np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        yield info, (batch, seq), lambda feeds=feeds: session.run(["embeddings"], feeds)[0]


def run_ort_int8(args):
    """ONNX Runtime on the graph with its MatMul weights quantized by quantize_dynamic (int8
    weights, activations quantized per call: MatMulInteger / DynamicQuantizeLinear), ORT's
    own answer to Kiln's Q8_0 weights."""
    import numpy as np
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from minilm_onnx import make_session, reference_batch

    quantized = os.path.join(args.out_dir, "minilm_int8.onnx")
    quantize_dynamic(args.onnx, quantized, weight_type=QuantType.QInt8)
    session = make_session(quantized, threads=2)
    ids, mask, expected = reference_batch()
    (got,) = session.run(["embeddings"], {"input_ids": ids, "attention_mask": mask})
    cosines = (got.astype(np.float64) * expected).sum(-1) / (
        np.linalg.norm(got, axis=-1) * np.linalg.norm(expected, axis=-1))
    info = {"version": f"onnxruntime {ort.__version__}, quantize_dynamic QInt8",
            "cosine": float(cosines.min())}
    for batch, seq in SHAPES:
        ids = np.array(bench_ids(batch, seq), np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        yield info, (batch, seq), lambda feeds=feeds: session.run(["embeddings"], feeds)[0]


class TorchEncoder:
    """all-MiniLM-L6-v2 in PyTorch eager ops: BERT, masked mean pooling, L2 normalization."""

    def __init__(self, model_dir):
        import torch
        from minilm_onnx import load_model
        config, weights = load_model(model_dir)
        self.W = {k: torch.from_numpy(v) for k, v in weights.items()}
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.eps = config["layer_norm_eps"]

    def __call__(self, ids, mask):
        import torch
        import torch.nn.functional as F
        W, H, nh = self.W, self.hidden, self.heads
        d = H // nh
        batch, seq = ids.shape

        def linear(x, p):
            return F.linear(x, W[p + ".weight"], W[p + ".bias"])  # weights are [out, in]

        def layer_norm(x, p):
            return F.layer_norm(x, (H,), W[p + ".weight"], W[p + ".bias"], self.eps)

        x = (W["embeddings.word_embeddings.weight"][ids]
             + W["embeddings.position_embeddings.weight"][:seq]
             + W["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, "embeddings.LayerNorm")
        maskf = mask.to(x.dtype)
        bias = ((1.0 - maskf) * -1e9)[:, None, None, :]  # [batch, 1, 1, seq]
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(name):  # [batch, seq, H] -> [batch, heads, seq, d]
                return linear(x, f"{p}.attention.self.{name}").view(batch, seq, nh, d) \
                    .transpose(1, 2)

            q, k, v = split("query"), split("key"), split("value")
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)) + bias
            ctx = torch.matmul(scores.softmax(-1), v).transpose(1, 2).reshape(batch, seq, H)
            x = layer_norm(linear(ctx, f"{p}.attention.output.dense") + x,
                           f"{p}.attention.output.LayerNorm")
            h = F.gelu(linear(x, f"{p}.intermediate.dense"))  # exact (erf) GELU
            x = layer_norm(linear(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        m = maskf.unsqueeze(-1)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, p=2.0, dim=-1, eps=1e-12)


def _blas_libraries():
    """The BLAS/LAPACK libraries loaded into this process (Linux), to tell which one torch
    got: Debian's torch calls whatever libblas.so.3 points to (reference BLAS by default)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if ".so" in line}
    except OSError:
        return []
    keys = ("blas", "lapack", "mkl", "blis", "dnnl")
    return sorted(os.path.realpath(p) for p in libs
                  if any(k in os.path.basename(p).lower() for k in keys))


def run_torch(args):
    import numpy as np
    import torch
    from minilm_onnx import reference_batch

    torch.set_num_threads(2)
    encoder = TorchEncoder(args.model_dir)
    ids, mask, expected = reference_batch()
    with torch.inference_mode():
        got = encoder(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    info = {"version": f"torch {torch.__version__}",
            "check": float(np.abs(got.astype(np.float64) - expected).max()),
            "threads": torch.get_num_threads(), "blas": _blas_libraries()}
    for batch, seq in SHAPES:
        ids = torch.tensor(bench_ids(batch, seq), dtype=torch.int64)
        mask = torch.ones_like(ids)

        def call(ids=ids, mask=mask):
            with torch.inference_mode():
                return encoder(ids, mask)

        yield info, (batch, seq), lambda: call().numpy()


def engine_main(args):
    """Child: check against the reference, time each shape, print one JSON line."""
    import numpy as np
    runner = {"ort": run_ort, "ort_int8": run_ort_int8, "torch": run_torch}[args.engine]
    result = {"python": sys.executable, "shapes": []}
    for info, (batch, seq), fn in runner(args):
        if "cosine" in info and "cosine" not in result:
            # ONNX Runtime's int8 graph is timed whatever its accuracy (the table reports it);
            # only a broken one, far from the reference, stops the run.
            result.update(info)
            if not info["cosine"] >= INT8_BROKEN:
                print(json.dumps(result))
                sys.exit(f"{args.engine}: lowest cosine to the reference {info['cosine']:.4f} "
                         f"is under {INT8_BROKEN}")
        if "check" not in result and "cosine" not in result:
            result.update(info)
            if not info["check"] <= TOLERANCE:
                print(json.dumps(result))
                sys.exit(f"{args.engine}: max |diff| to the reference {info['check']:.3g} "
                         f"is over {TOLERANCE:g}")
        times, out = time_calls(fn, args.calls)
        np.save(os.path.join(args.out_dir, f"{args.engine}_{batch}x{seq}.npy"), out)
        result["shapes"].append({"batch": batch, "seq": seq, "times_ms": times})
    print(json.dumps(result))


# --- driver ----------------------------------------------------------------------

def _imports(python, module):
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def pick_python(given, module):
    if given:
        return given
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and _imports(python, module):
            return python
    return None


def run_kiln(binary, model_dir, calls, notes):
    """Kiln's side: build/bench/minilm_bench (same weights, same token ids), one process.
    Returns {label: {(batch, seq): [ms, ...]}} for the eager forward (BM_MiniLM) and the
    same forward through kiln::compile (BM_MiniLMCompiled)."""
    print(f"timing Kiln ({binary}) ...", file=sys.stderr, flush=True)
    env = dict(os.environ, KILN_MINILM_DIR=model_dir)
    # Only the whole forward: minilm_bench also times stages alone (BM_MiniLMEmbedding, in µs),
    # whose rows would otherwise be mixed into the same batch x seq.
    proc = subprocess.run([binary, "--benchmark_filter=^BM_MiniLM(Q8Compiled|Compiled)?/",
                           f"--benchmark_repetitions={calls}", "--benchmark_min_time=0.01",
                           "--benchmark_format=json"], env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        notes.append(f"Kiln: FAILED (exit {proc.returncode})")
        return {}
    labels = {"BM_MiniLM": "Kiln eager (minilm_bench)",
              "BM_MiniLMCompiled": "Kiln compiled (minilm_bench)",
              "BM_MiniLMQ8Compiled": "Kiln compiled, q8_0 weights (minilm_bench)"}
    times = {}
    for b in json.loads(proc.stdout)["benchmarks"]:
        name, *shape = b["run_name"].split("/")
        if b.get("run_type") != "iteration" or name not in labels:
            continue
        batch, seq = (int(x) for x in shape[:2])
        # ms (the bench's unit)
        times.setdefault(labels[name], {}).setdefault((batch, seq), []).append(b["real_time"])
    return times


def driver_main(args):
    pythons = {"ort": pick_python(args.ort_python, "onnxruntime"),
               "torch": pick_python(args.torch_python, "torch")}
    pythons["ort_int8"] = pythons["ort"]
    out_dir = tempfile.mkdtemp(prefix="kiln-minilm-compare-")
    onnx_path = args.onnx
    if pythons["ort"] and not onnx_path:
        onnx_path = os.path.join(tempfile.gettempdir(), "kiln-minilm-l6-v2.onnx")
        print(f"building {onnx_path} ...", file=sys.stderr, flush=True)
        subprocess.run([pythons["ort"], os.path.join(REPO, "tools", "minilm_onnx.py"),
                        args.model_dir, onnx_path], check=True, stdout=sys.stderr)

    # Per engine label and (batch, seq): every timed call of every round. The engines take
    # turns round after round, so a slow minute of this shared machine falls on all of them.
    times, results, notes = {}, {}, []
    for _ in range(args.rounds):
        if args.kiln:
            for label, shapes in run_kiln(args.kiln, args.model_dir, args.calls, notes).items():
                for shape, t in shapes.items():
                    times.setdefault(label, {}).setdefault(shape, []).extend(t)
        for engine, (module, label) in ENGINES.items():
            if not pythons[engine]:
                if not any(label in n for n in notes):
                    notes.append(f"{label}: skipped ({module} imports under neither this python "
                                 f"nor /usr/bin/python3; pass --{engine}-python)")
                continue
            print(f"timing {label} under {pythons[engine]} ...", file=sys.stderr, flush=True)
            cmd = [pythons[engine], os.path.abspath(__file__), args.model_dir, "--engine", engine,
                   "--calls", str(args.calls), "--out-dir", out_dir]
            if onnx_path:
                cmd += ["--onnx", onnx_path]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            lines = proc.stdout.strip().splitlines()
            if proc.returncode != 0 or not lines:
                notes.append(f"{label}: FAILED (exit {proc.returncode})")
                continue
            results[engine] = json.loads(lines[-1])
            for s in results[engine]["shapes"]:
                times.setdefault(label, {}).setdefault((s["batch"], s["seq"]), []).extend(
                    s["times_ms"])

    print(f"all-MiniLM-L6-v2, CPU, 2 threads; {args.rounds} round(s), the engines in turn; per "
          f"round, {WARMUP} warm-up calls then {args.calls} timed calls per engine and shape\n")
    print("| engine | batch x seq | median ms | min ms |")
    print("|---|---|---|---|")
    for label, shapes in times.items():
        for (batch, seq), t in shapes.items():
            print(f"| {label} | {batch} x {seq} | {statistics.median(t):.2f} | {min(t):.2f} |")
    print()
    for engine, r in results.items():
        if "cosine" in r:
            print(f"- {r['version']} ({r['python']}): lowest cosine to the float64 reference "
                  f"{r['cosine']:.5f}")
            continue
        extra = ""
        if engine == "torch":
            extra = f"; threads {r['threads']}; BLAS: {', '.join(r['blas']) or 'none seen'}"
        print(f"- {r['version']} ({r['python']}): max |diff| to the float64 reference "
              f"{r['check']:.3g}{extra}")
    if "ort" in results and "torch" in results:
        import numpy as np
        for batch, seq in SHAPES:
            a, b = (np.load(os.path.join(out_dir, f"{e}_{batch}x{seq}.npy"))
                    for e in ("ort", "torch"))
            print(f"- ONNX Runtime vs PyTorch on the {batch} x {seq} benchmark input: "
                  f"max |diff| {float(np.abs(a - b).max()):.3g}")
    for note in notes:
        print(f"- {note}")
    shutil.rmtree(out_dir, ignore_errors=True)
    return 1 if any("FAILED" in n for n in notes) else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("--onnx", help="graph from tools/minilm_onnx.py (built if not given)")
    parser.add_argument("--calls", type=int, default=11, help="timed calls per engine and shape")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of every engine in turn; medians pool all rounds' calls")
    parser.add_argument("--ort-python", help="interpreter with numpy and onnxruntime")
    parser.add_argument("--torch-python", help="interpreter with numpy and torch")
    parser.add_argument("--kiln", help="build/bench/minilm_bench, timed first in its own process")
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)  # child process
    parser.add_argument("--out-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    if args.engine:
        engine_main(args)
    else:
        sys.exit(driver_main(args))


if __name__ == "__main__":
    main()
