#!/usr/bin/env python3
"""ONNX Runtime's GEMM (MLAS) on the shapes of bench/gemm_bench.cc, for a side-by-side check
of Kiln's GEMM core: x [m, 384] times a [384, 1536] weight plus a bias row, as one MatMul and
one Add on the CPU provider with 2 intra-op threads.

    /tmp/venv-bench/bin/python bench/ort_gemm.py [M ...]        # default: 512
    build/bench/gemm_bench --benchmark_filter='BM_KilnGemmCore/m:512/torch_layout:1'

An argument M:K:N times x [M, K] by a [K, N] weight instead (MiniLM's other linears:
512:384:1152, 512:384:384, 512:1536:384; beside BM_KilnGemmShapes).

Prints the median and least of 200 timed calls after 20 warm-ups, and GFLOP/s at the
median. onnxruntime is a comparison point here only, never a Kiln dependency.
"""
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

K, N = 384, 1536


def session(m, rng, K=K, N=N):
    w = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    b = rng.uniform(-1, 1, (N,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, N])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def main():
    rng = np.random.default_rng(1)
    for arg in sys.argv[1:] or ["512"]:
        m, k, n = ([int(v) for v in arg.split(":")] + [K, N])[:3] if ":" in arg else (int(arg), K, N)
        s = session(m, rng, k, n)
        x = {"x": rng.uniform(-1, 1, (m, k)).astype(np.float32)}
        for _ in range(20):
            s.run(None, x)
        times = []
        for _ in range(200):
            t = time.perf_counter()
            s.run(None, x)
            times.append(time.perf_counter() - t)
        median = statistics.median(times)
        print(f"ORT MatMul + Add, {m}:{k}:{n}: median {median * 1e3:.3f} ms, "
              f"least {min(times) * 1e3:.3f} ms, {2 * m * k * n / median / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
