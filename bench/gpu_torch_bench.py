#!/usr/bin/env python3
"""The GPU bench's workloads in PyTorch eager and torch.compile, plus the two ceilings:
a large device-to-device copy (bytes read + written) and cuBLAS (bf16 matmul).

Run on a GPU machine by scripts/gpu-check.sh, beside build-gpu/bench/gpu_bench; medians of
CUDA-event timings after warm-up, inputs from a seeded generator (never zeros).
    python3 bench/gpu_torch_bench.py [--quick]
"""
import sys

import torch

QUICK = "--quick" in sys.argv
REPS = 5 if QUICK else 20


def median_ms(fn):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def report(system, name, ms, nbytes=0.0, flops=0.0):
    rate = f"{flops / ms * 1e-9:9.1f} TFLOP/s" if flops else f"{nbytes / ms * 1e-6:9.1f} GB/s"
    print(f"{system:<14} {name:<34} {ms:9.3f} ms {rate}", flush=True)


def chain(x):
    return torch.exp(-torch.abs(x * 2.0 - 1.0)) * 0.5 + torch.relu(x) - 0.25


def main():
    torch.manual_seed(0)
    dev = "cuda"
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    compiled_chain = torch.compile(chain)
    n = 1 << (24 if QUICK else 28)
    x = torch.rand(n, device=dev)
    y = torch.empty_like(x)
    report("copy", "d2d copy 2^28 f32", median_ms(lambda: y.copy_(x)), 8.0 * n)
    report("torch eager", "chain8 f32 2^28", median_ms(lambda: chain(x)), 8.0 * n)
    report("torch.compile", "chain8 f32 2^28", median_ms(lambda: compiled_chain(x)), 8.0 * n)
    del x, y

    m = 4096 if QUICK else 16384
    x = torch.rand(m, m, device=dev)
    for axis, name in ((1, "sum rows f32 16384^2"), (0, "sum cols f32 16384^2")):
        f = torch.compile(lambda t, a=axis: t.sum(a))
        report("torch eager", name, median_ms(lambda a=axis: x.sum(a)), 4.0 * m * m)
        report("torch.compile", name, median_ms(lambda: f(x)), 4.0 * m * m)
    del x

    rows, cols = (4096 if QUICK else 32768), 4096
    for dt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        x = torch.randn(rows, cols, device=dev, dtype=dt)
        w, b = torch.ones(cols, device=dev, dtype=dt), torch.zeros(cols, device=dev, dtype=dt)
        nbytes = 2.0 * rows * cols * x.element_size()
        sm = torch.compile(lambda t: torch.softmax(t, -1))
        ln = torch.compile(lambda t: torch.nn.functional.layer_norm(t, (cols,), w, b))
        report("torch eager", f"softmax {tag} 32768x4096", median_ms(lambda: torch.softmax(x, -1)), nbytes)
        report("torch.compile", f"softmax {tag} 32768x4096", median_ms(lambda: sm(x)), nbytes)
        report("torch eager", f"layer_norm {tag} 32768x4096",
               median_ms(lambda: torch.nn.functional.layer_norm(x, (cols,), w, b)), nbytes)
        report("torch.compile", f"layer_norm {tag} 32768x4096", median_ms(lambda: ln(x)), nbytes)
        del x

    k = 1024 if QUICK else 4096
    a = torch.randn(k, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(k, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, device=dev, dtype=torch.bfloat16)
    flops = 2.0 * k ** 3
    mm = torch.compile(lambda p, q, r: torch.relu(p @ q + r))
    report("cuBLAS", "matmul bf16 4096^3", median_ms(lambda: a @ w), flops=flops)
    report("torch eager", "relu(x@w+b) bf16 4096^3", median_ms(lambda: torch.relu(a @ w + b)), flops=flops)
    report("torch.compile", "relu(x@w+b) bf16 4096^3", median_ms(lambda: mm(a, w, b)), flops=flops)

    # The quantized products of gpu_bench (a [5632, 2048] weight) with the weight in bf16: what
    # a user without a quantized kernel runs. GB/s counts the bf16 weight's bytes.
    n, k, prompt = 5632, 2048, (128 if QUICK else 512)
    weight = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    one = torch.randn(1, k, device=dev, dtype=torch.bfloat16)
    rows = torch.randn(prompt, k, device=dev, dtype=torch.bfloat16)
    linear = torch.nn.functional.linear
    report("torch eager", "gemv bf16 5632x2048", median_ms(lambda: linear(one, weight)), 2.0 * n * k)
    report("torch eager", "gemm bf16 512x5632x2048", median_ms(lambda: linear(rows, weight)),
           flops=2.0 * prompt * n * k)


if __name__ == "__main__":
    main()
