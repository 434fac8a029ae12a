#!/usr/bin/env python3
"""SmolLM2-135M-Instruct Q4_1: Kiln (build/bench/llm_bench) against llama.cpp, one run.

llama.cpp comes from the PyPI wheel cyllama (a prebuilt llama.cpp), a comparison point only:

    python3 -m pip install --target /tmp/kq cyllama==0.2.18
    PYTHONPATH=/tmp/kq python3 bench/llm_compare.py MODEL.gguf --kiln build/bench/llm_bench

For 1 and 2 threads: decode tokens/s after a 16-token prompt, and prefill tokens/s for
prompts of 128 and 512 tokens (the same ids for both), medians of --reps runs. The two run
one after the other --rounds times, and the table gives the median of the rounds: on a
shared machine the rate drifts over minutes, and alternating shares the drift out.
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import cyllama.llama.llama_cpp as llama


def prompt(n):
    return [1] + [100 + (i * 7919) % 40000 for i in range(1, n)]


def llama_cpp_rates(path, threads, reps):
    params = llama.LlamaModelParams()
    params.n_gpu_layers = 0
    model = llama.LlamaModel(path, params)
    cp = llama.LlamaContextParams()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512
    cp.n_threads = cp.n_threads_batch = threads
    ctx = llama.LlamaContext(model, cp)

    def run(ids, n_past):
        batch = llama.LlamaBatch(n_tokens=len(ids), embd=0, n_seq_max=1)
        batch.set_batch(ids, n_past=n_past, logits_all=False)
        ctx.decode(batch)
        ctx.synchronize()

    rates = {}
    for n in (128, 512):
        times = []
        for r in range(reps + 1):  # the first run warms up
            ctx.kv_cache_clear()
            start = time.perf_counter()
            run(prompt(n), 0)
            if r:
                times.append(time.perf_counter() - start)
        rates[f"prefill {n}"] = n / statistics.median(times)
    steps = []
    for r in range(reps):
        ctx.kv_cache_clear()
        run(prompt(16), 0)
        start = time.perf_counter()
        for i in range(64):
            run([253], 16 + i)
        steps.append((time.perf_counter() - start) / 64)
    rates["decode"] = 1 / statistics.median(steps)
    return rates


def kiln_rates(binary, path, threads, reps):
    env = dict(os.environ, KILN_NUM_THREADS=str(threads), KILN_SMOLLM2=path)
    out = subprocess.run([binary, f"--benchmark_repetitions={reps}", "--benchmark_format=json",
                          "--benchmark_filter=Decode|Prefill"],
                         env=env, check=True, capture_output=True, text=True).stdout
    rates = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        key = "decode" if "Decode" in name else "prefill " + name.split("/")[1]
        rates[key] = b["tok/s"]
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--kiln", default="build/bench/llm_bench")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    llama.disable_logging()
    print("| threads | | decode tok/s | prefill 128 tok/s | prefill 512 tok/s |")
    print("|---|---|---|---|---|")
    keys = ("decode", "prefill 128", "prefill 512")
    for threads in (1, 2):
        rounds = {"llama.cpp": [], "Kiln": []}
        for _ in range(args.rounds):
            rounds["llama.cpp"].append(llama_cpp_rates(args.model, threads, args.reps))
            rounds["Kiln"].append(kiln_rates(args.kiln, args.model, threads, args.reps))
        for name, runs in rounds.items():
            median = {k: statistics.median(r[k] for r in runs) for k in keys}
            print(f"| {threads} | {name} | {median['decode']:.1f} | {median['prefill 128']:.0f} | "
                  f"{median['prefill 512']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
