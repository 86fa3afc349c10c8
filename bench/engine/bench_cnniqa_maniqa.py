"""CNNIQA and MANIQA: pyiqa's own forward against the engine's (banana100/metrics/engine/fastpaths.py), side by side.

    python -m bench.engine.bench_cnniqa_maniqa                                   # CPU: CNNIQA 1024 and 2048, MANIQA 1 crop at 1024
    python -m bench.engine.bench_cnniqa_maniqa --device cuda --maniqa-crops 20 --batch 8   # on a GPU

Both archs with random weights (banana100/testing/untrained.py): the cost does not depend on the
weights. Each of --repeats rounds times pyiqa's forward (`InferenceModel(x)`) and the fast one on
the same batch, one after the other, the order alternating; the speed-up is the median of the
rounds' ratios (a busy machine slows both alike). The two outputs must be bit-identical. The
floating-point operations of each (torch's FlopCounterMode: matrix products and convolutions) are
counted on the warm-up call.
Also profiles pyiqa's CNNIQA by stage (the convolution, the two whole-image pools, the global
amax / amin that replace them): where its time goes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import environment, results_path, scratch_dir, write_results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cnniqa-sizes", default="1024,2048")
    ap.add_argument("--maniqa-sizes", default="1024")
    ap.add_argument("--maniqa-crops", type=int, default=1, help="pyiqa's is 20; 1 keeps a CPU run short (the saving is per crop)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=results_path(__file__))
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    from banana100.metrics.engine import fastpaths
    from banana100.testing.untrained import build_untrained

    dev = torch.device(args.device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def timed(fn):
        sync()
        t = time.perf_counter()
        out = fn()
        sync()
        return time.perf_counter() - t, out

    def best(fn):
        fn()  # warm-up
        return min((timed(fn) for _ in range(args.repeats)), key=lambda t: t[0])

    def side_by_side(theirs, ours):
        """(best seconds of each, median of the per-round ratios, their outputs); the order
        alternates by round, so a busy machine slows both alike."""
        with FlopCounterMode(display=False) as count_theirs:  # the warm-up calls, counted
            want = theirs()
        with FlopCounterMode(display=False) as count_ours:
            got = ours()
        flops[:] = [count_theirs.get_total_flops(), count_ours.get_total_flops()]
        t_theirs, t_ours = [], []
        for r in range(args.repeats):
            for fn, times in ((theirs, t_theirs), (ours, t_ours))[:: 1 if r % 2 == 0 else -1]:
                times.append(timed(fn)[0])
        ratios = sorted(a / b for a, b in zip(t_theirs, t_ours, strict=True))
        return min(t_theirs), min(t_ours), ratios[len(ratios) // 2], want, got

    flops: list[int] = []  # pyiqa's and ours, of the last side_by_side
    tmp = scratch_dir("bench-cnniqa-maniqa-")
    rows = []
    for arch, sizes, kwargs in (("cnniqa", args.cnniqa_sizes, {}),
                                ("maniqa", args.maniqa_sizes, {"test_sample": args.maniqa_crops})):
        from banana100.testing import untrained

        untrained.UNTRAINED_KWARGS[arch] = {**untrained.UNTRAINED_KWARGS[arch], **kwargs}
        model = build_untrained(arch, tmp, device=str(dev))
        fast = fastpaths.speed_up(model)
        assert fast is not model, f"{arch}: no fast path"
        for side in (int(s) for s in sizes.split(",")):
            x = torch.rand(args.batch, 3, side, side, generator=torch.Generator().manual_seed(side)).to(dev)
            with torch.no_grad():
                t_pyiqa, t_fast, ratio, want, got = side_by_side(lambda m=model: m(x), lambda f=fast: f(x))
            row = {"arch": arch, "side": side, "batch": args.batch, **kwargs, "pyiqa_s": round(t_pyiqa, 4),
                   "fast_s": round(t_fast, 4), "speedup_median": round(ratio, 2),
                   "bit_identical": bool(torch.equal(want, got)),
                   "gflop_per_image_pyiqa": round(flops[0] / args.batch / 1e9, 1),
                   "gflop_per_image_fast": round(flops[1] / args.batch / 1e9, 1)}
            if arch == "cnniqa":  # where pyiqa's CNNIQA spends its time
                with torch.no_grad():
                    t_conv, h = best(lambda m=model: m.net.conv1(x))
                    full = (h.size(-2), h.size(-1))
                    t_pool, _ = best(lambda: (F.max_pool2d(h, full), -F.max_pool2d(-h, full)))
                    t_amax, _ = best(lambda: (h.amax(dim=(-2, -1)), h.amin(dim=(-2, -1))))
                row.update(conv_s=round(t_conv, 4), pools_s=round(t_pool, 4), amax_amin_s=round(t_amax, 4))
            print(row, flush=True)
            rows.append(row)
        del model, fast
    write_results(args.out, {"device": str(dev), "environment": environment(), "argv": sys.argv[1:], "rows": rows})
    return 0 if all(r["bit_identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
