#!/usr/bin/env python3
"""Per-kernel time of one Kiln benchmark, summed per forward.

Runs a Google Benchmark binary with KILN_LOG=2, which logs each kernel's time, and prints
for each kernel kind the median over syncs of its summed milliseconds per sync (the first
two syncs, which plan and compile, are left out), then the median and least total.

    bench/kernel_times.py build/bench/minilm_bench [BM_MiniLM/8/64]

Comparing two builds: run this on each, alternating, several times (the VMs are noisy).
"""
import collections
import os
import re
import statistics
import subprocess
import sys


def kernel_times(binary, benchmark):
    env = dict(os.environ, KILN_LOG="2")
    log = subprocess.run(
        [binary, f"--benchmark_filter={benchmark}", "--benchmark_min_time=1"],
        capture_output=True, text=True, env=env, check=True).stderr
    syncs, current = [], None
    for line in log.splitlines():
        if "sync on cpu:" in line:
            current = collections.defaultdict(float)
            syncs.append(current)
        match = re.search(r"kernel (\S+) nodes .*? ([0-9.]+) ms", line)
        if match and current is not None:
            current[match.group(1)] += float(match.group(2))
    return syncs[2:]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    syncs = kernel_times(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "BM_MiniLM/8/64")
    if not syncs:
        sys.exit("no timed syncs in the log (is this a Kiln benchmark?)")
    for kind in sorted({k for s in syncs for k in s}):
        print(f"{kind:60s} {statistics.median(s.get(kind, 0) for s in syncs):8.3f}")
    totals = [sum(s.values()) for s in syncs]
    print(f"{'all kernels (median over %d syncs)' % len(syncs):60s} "
          f"{statistics.median(totals):8.3f}  least {min(totals):.3f}")


if __name__ == "__main__":
    main()
