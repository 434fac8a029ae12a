#!/usr/bin/env python3
"""Time to first result: bench/first_call_bench in fresh processes, cold and warm.

For each model (one large pointwise kernel over 2M floats; all-MiniLM-L6-v2 at 8 x 64 tokens;
SmolLM2-135M-Instruct Q4_1, a 16-token prefill and a decode step) and each compile mode (the default, which compiles CPU loops in
the background, and KILN_CPU_JIT=sync, which waits for them):
  - cold: a new, empty cache folder (KILN_CACHE_DIR);
  - warm: a cache folder that an earlier process with KILN_CPU_JIT=sync filled;
  - bundle (MiniLM): a new, empty cache folder, the model's compiled function loaded from a
    bundle that an earlier process saved (docs/bundles.md).
Each state runs --runs fresh processes; the table gives medians of their first call, their
second, and the median of their next ten.

    scripts/fetch-minilm.sh; scripts/fetch-smollm2.sh
    python3 bench/first_call.py --bench build/bench/first_call_bench
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile


def run(bench, model, cache, sync, extra=()):
    env = dict(os.environ, KILN_CACHE_DIR=cache, KILN_DEVICE="cpu")
    env.pop("KILN_CPU_JIT", None)
    if sync:
        env["KILN_CPU_JIT"] = "sync"
    out = subprocess.run([bench, model, *extra], env=env, check=True, capture_output=True,
                         text=True).stdout.split()
    return {out[i]: float(out[i + 1]) for i in range(0, len(out), 2)}


def medians(results):
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="build/bench/first_call_bench")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--models", default="pointwise,minilm,smollm2")
    args = parser.parse_args()
    print("| model | compile mode | cache | first call ms | second ms | later ms |")
    print("|---|---|---|---|---|---|")
    for model in args.models.split(","):
        warm = tempfile.mkdtemp(prefix="kiln_first_call_warm_")
        bundle = os.path.join(warm, "bundle") if model == "minilm" else None
        # Fills the cache (every loop compiled) and, for MiniLM, saves the bundle.
        run(args.bench, model, warm, sync=True, extra=(bundle,) if bundle else ())
        for sync in (False, True):
            mode = "sync" if sync else "background"
            cold = []
            for _ in range(args.runs):
                folder = tempfile.mkdtemp(prefix="kiln_first_call_cold_")
                cold.append(run(args.bench, model, folder, sync))
                shutil.rmtree(folder)
            states = [("cold", cold),
                      ("warm", [run(args.bench, model, warm, sync) for _ in range(args.runs)])]
            if bundle:
                from_bundle = []
                for _ in range(args.runs):
                    folder = tempfile.mkdtemp(prefix="kiln_first_call_bundle_")
                    from_bundle.append(run(args.bench, "minilm-bundle", folder, sync, (bundle,)))
                    shutil.rmtree(folder)
                states.append(("bundle", from_bundle))
            for state, results in states:
                m = medians(results)
                print(f"| {model} | {mode} | {state} | {m['first']:.1f} | {m['second']:.1f} | "
                      f"{m['later']:.1f} |", flush=True)
        shutil.rmtree(warm)


if __name__ == "__main__":
    main()
