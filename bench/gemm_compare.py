#!/usr/bin/env python3
"""Kiln's CPU GEMM against OpenBLAS and oneDNN, each engine in its own process, one after
the other, and a markdown table of median GFLOP/s with Kiln's ratio to OpenBLAS.

    python3 bench/gemm_compare.py [build/bench/gemm_bench] [--repetitions 5] [--threads 2]

Each engine runs alone because OpenBLAS's and oneDNN's OpenMP threads keep spinning after a
call and would slow whatever runs next in the same process. Shapes: x [m, 384] times a
384 x 1536 weight, in PyTorch's [out, in] layout and pre-transposed (bench/gemm_bench.cc).
"""
import argparse
import json
import os
import subprocess

ENGINES = [
    ("KilnLinearRelu", "Kiln relu(linear) (epilogue fused)"),
    ("KilnGemmCore", "Kiln GEMM core"),
    ("OpenBlasSgemm", "OpenBLAS sgemm"),
    ("OneDnnSgemm", "oneDNN sgemm"),
]


def run_engine(binary, engine, repetitions, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run(
        [binary, f"--benchmark_filter=BM_{engine}/", f"--benchmark_repetitions={repetitions}",
         "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.3",
         "--benchmark_format=json"],
        env=env, check=True, capture_output=True, text=True).stdout
    medians = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median" and "GFLOP/s" in b:
            # run_name: BM_Engine/m:64/torch_layout:1/real_time
            parts = dict(p.split(":") for p in b["run_name"].split("/")[1:3])
            medians[(int(parts["m"]), int(parts["torch_layout"]))] = b["GFLOP/s"] / 1e9
    return medians


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", nargs="?", default="build/bench/gemm_bench")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    results = {e: run_engine(args.binary, e, args.repetitions, args.threads) for e, _ in ENGINES}
    print("| m | weight layout | " + " | ".join(label for _, label in ENGINES) +
          " | Kiln relu(linear) / OpenBLAS |")
    print("|---" * (len(ENGINES) + 3) + "|")
    for key in sorted(results["OpenBlasSgemm"]):
        m, torch_layout = key
        cells = [f"{results[e].get(key, float('nan')):.1f}" for e, _ in ENGINES]
        ratio = results["KilnLinearRelu"][key] / results["OpenBlasSgemm"][key]
        layout = "[out, in]" if torch_layout else "[in, out]"
        print(f"| {m} | {layout} | " + " | ".join(cells) + f" | {ratio:.2f} |")


if __name__ == "__main__":
    main()
