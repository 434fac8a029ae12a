#!/usr/bin/env python3
"""ONNX Runtime's own per-operator times for the MiniLM graph, to set beside Kiln's
bench/kernel_times.py: which part of the forward each engine spends where.

    python bench/ort_profile.py /tmp/minilm.onnx [BATCH SEQ] [--runs 30]

Builds the InferenceSession as bench/minilm_compare.py does (2 intra-op threads, 1 inter-op
thread, ORT_ENABLE_ALL, the CPU provider) with profiling on, feeds the benchmark's token ids,
and prints the median over runs (the first 5 left out) of each operator type's summed kernel
time per run, and of the whole run. The graph comes from tools/minilm_onnx.py.
onnxruntime is a comparison point only, never a Kiln dependency.
"""
import argparse
import bisect
import collections
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_compare import bench_ids  # noqa: E402

SKIP = 5


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("onnx")
    parser.add_argument("batch", nargs="?", type=int, default=8)
    parser.add_argument("seq", nargs="?", type=int, default=64)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    session = ort.InferenceSession(args.onnx, options, providers=["CPUExecutionProvider"])
    ids = np.array(bench_ids(args.batch, args.seq), np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    for _ in range(args.runs):
        session.run(["embeddings"], feeds)
    with open(session.end_profiling()) as f:
        events = json.load(f)
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    starts = [r["ts"] for r in runs]
    per_op = collections.defaultdict(lambda: [0.0] * len(runs))
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            run = bisect.bisect_right(starts, e["ts"]) - 1
            per_op[e["args"]["op_name"]][run] += e["dur"] / 1000
    print(f"ONNX Runtime {ort.__version__}, {args.batch} x {args.seq}, median of "
          f"{len(runs) - SKIP} runs: whole run "
          f"{statistics.median(r['dur'] / 1000 for r in runs[SKIP:]):.2f} ms")
    for op, times in sorted(per_op.items(), key=lambda kv: -statistics.median(kv[1][SKIP:])):
        print(f"  {op:28s} {statistics.median(times[SKIP:]):8.3f} ms")


if __name__ == "__main__":
    main()
