"""Benchmark: the chain runner + gemini editor (real google-genai client) against the local
stand-in server with a fixed latency, at several concurrencies.

    python -m bench.generation.bench_gemini [--latency 0.2] [--concurrency 1 4 16] [--steps 20] [--size 256]

For each concurrency K it runs K chains of `--steps` steps (one source image per chain, a
`--size` square noisy PNG: 64 px by default, about 12 KiB; 256 px is about 170 KiB) and reports:
- throughput, steps per second, and as a share of the ideal K / latency;
- gross overhead per step: a chain's time per step minus the server's fixed latency (HTTP,
  the SDK's JSON/base64 work and the stand-in's own work included);
- runner overhead per step: the time between the end of one `generate_content` call of a
  chain and the start of its next one (mean and 95th percentile): what the runner and the
  editor add to each step (decoding and verifying the answer, hashing, the record, handing
  the write to the background writer, the ledger). The fsynced writes overlap the next call.
The stand-in runs in its own process, so it does not compete for this process's GIL.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import write_results


SERVER = """
from banana100.testing.gemini_standin import StandIn
s = StandIn(latency_s={latency!r}, noise=False)
print(s.base_url, flush=True)
sys.stdin.read()
s.close()
"""


def make_sources(folder: Path, n: int, size: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        xx = np.linspace(30, 230, size)[None, :, None]
        img = np.clip(xx + rng.normal(0, 20, (size, size, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(folder / f"src{i:02d}.png")


def bench(base_url: str, k: int, steps: int, latency: float, size: int, work: Path) -> dict:
    from banana100.chains.editors.gemini import GeminiEditor
    from banana100.chains.runner import generate_chains

    src = work / f"src_{k}"
    out = work / f"run_{k}"
    make_sources(src, k, size)
    editor = GeminiEditor(base_url=base_url, timeout_s=30)
    models = editor.connect().models
    real = models.generate_content
    spans: dict[int, list[tuple[float, float]]] = {}  # thread -> (start, end) of each SDK call

    def timed(*a, **kw):
        t = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            spans.setdefault(threading.get_ident(), []).append((t, time.perf_counter()))

    models.generate_content = timed
    t0 = time.perf_counter()
    summary = generate_chains(editor, src, "replicate", steps, 1, out, concurrency=k, progress=False)
    wall = time.perf_counter() - t0
    models.generate_content = real
    # Between two calls of one chain: everything the runner and the editor do for a step
    # (decode and verify the answer, hash, record, hand the write over, bookkeeping).
    gaps = [b[0] - a[1] for calls in spans.values() for a, b in itertools.pairwise(calls)]
    made = summary.written - k  # edit steps (step 0 is the source copy)
    lat = [
        json.loads(line)["latency_s"]
        for line in (out / "calls.jsonl").read_text().splitlines()
        if '"event": "end"' in line
    ]
    per_step = wall / steps  # a chain's time per step
    return {
        "concurrency": k,
        "chains": k,
        "steps_per_chain": steps,
        "steps": made,
        "wall_s": round(wall, 3),
        "throughput_steps_s": round(made / wall, 2),
        "ideal_steps_s": round(k / latency, 2),
        "share_of_ideal": round((made / wall) / (k / latency), 4),
        # against the SDK call latency actually measured (HTTP, JSON, the stand-in's own work
        # and this machine's timer slack included): the share the runner itself keeps
        "share_of_call_bound": round((made / wall) / (k / float(np.mean(lat))), 4),
        "gross_overhead_ms": round((per_step - latency) * 1000, 2),
        "call_latency_ms": round(float(np.mean(lat)) * 1000, 2),
        "runner_overhead_ms": round(float(np.mean(gaps)) * 1000, 2),
        "runner_overhead_p95_ms": round(float(np.percentile(gaps, 95)) * 1000, 2),
        "image_bytes": (src / "src00.png").stat().st_size,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = p.parse_args()

    os.environ.setdefault("GEMINI_API_KEY", "bench-key-not-secret")
    code = SERVER.format(latency=args.latency)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        results = []
        with tempfile.TemporaryDirectory(prefix="banana100-bench-") as tmp:
            bench(base_url, 1, 2, args.latency, args.size, Path(tmp) / "warmup")  # imports, connections
            for k in args.concurrency:
                r = bench(base_url, k, args.steps, args.latency, args.size, Path(tmp))
                results.append(r)
                print(
                    f"K={k:>2}: {r['throughput_steps_s']:7.2f} steps/s = {100 * r['share_of_ideal']:5.1f} % of ideal "
                    f"({r['ideal_steps_s']:.2f}), {100 * r['share_of_call_bound']:5.1f} % of K / SDK call latency; "
                    f"per step: gross overhead {r['gross_overhead_ms']:6.2f} ms, "
                    f"runner overhead {r['runner_overhead_ms']:5.2f} ms (p95 {r['runner_overhead_p95_ms']:.2f}); "
                    f"SDK call {r['call_latency_ms']:.1f} ms",
                    flush=True,
                )
        if args.json:
            write_results(args.json, {"latency_s": args.latency, "size": args.size, "results": results})
    finally:
        server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    main()
