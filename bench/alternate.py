#!/usr/bin/env python3
"""Google Benchmark binaries run in turn, round after round, for A/B comparisons on a
noisy machine: both see the same slow and fast minutes.

    bench/alternate.py ROUNDS BINARY... [-- BENCHMARK ARGS]

Each run takes 3 repetitions; prints, per benchmark and binary, the least and the median
real time over all rounds.
"""
import collections
import json
import statistics
import subprocess
import sys


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if len(args) < 2:
        sys.exit(__doc__)
    rounds, binaries = int(args[0]), args[1:]
    times = collections.defaultdict(list)
    for _ in range(rounds):
        for binary in binaries:
            out = subprocess.run(
                [binary, "--benchmark_repetitions=3", "--benchmark_format=json"] + extra,
                capture_output=True, text=True, check=True).stdout
            for run in json.loads(out)["benchmarks"]:
                if run.get("run_type") == "iteration":
                    times[(run["run_name"], binary)].append(run["real_time"])
    for name in sorted({name for name, _ in times}):
        cells = [f"{b.split('/')[-1]}: least {min(times[(name, b)]):.3f} "
                 f"median {statistics.median(times[(name, b)]):.3f}" for b in binaries]
        print(name, "  ".join(cells))


if __name__ == "__main__":
    main()
