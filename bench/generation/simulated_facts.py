"""Check the simulated editor against the facts the Banana100 paper reports (see its module doc).

    BANANA100_WEIGHTS=../shared/iqa-params python -m bench.generation.simulated_facts [--side 1024] [--steps 100]

For each generated source (`banana100.synth.GENERATED_SOURCES`, drawn like the paper's: smooth,
noise-free, flat and textured areas) it runs a `replicate` chain with the default simulated
editor and measures, at steps 1, 5, 10, 20, 50 and 100:

- visible grain: `grain_in_flat_areas` (std of the new high-frequency content, in the source's
  flat areas, grey levels), and the first step at which it reaches 2, 3 and 4 grey levels;
- the tint: change of mean(G) - mean(R, B)/2 since the source, grey levels;
- PIQE, NIQE and BRISQUE (native backend) and the protocol's verdict (steps 1 -> 5, 10, 20).

Writes bench/results/generation/simulated_facts.json and prints a Markdown summary. Deterministic.
"""

import argparse
import platform
import time
from pathlib import Path

import sys
if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import RESULTS, write_results

from banana100.synth import GENERATED_SOURCES, generated_source
from banana100.chains.editors import make_editor
from banana100.chains.editors.base import EditRequest
from banana100.chains.editors.simulated import grain_in_flat_areas, tint
from banana100.metrics.engine.scorer import MetricScorer
from banana100.protocol import sensitivity
from banana100.chains.step import step_seed
from banana100.schema import chain_id
from banana100.chains.settings import get_setting

CHECK = (1, 5, 10, 20, 50, 100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", type=Path, default=RESULTS / "generation" / "simulated_facts.json")
    args = ap.parse_args()
    editor, setting = make_editor("simulated"), get_setting("replicate")
    scorers = {m: MetricScorer(m, device="cpu") for m in ("piqe", "niqe", "brisque")}
    steps = [k for k in CHECK if k <= args.steps]
    t0 = time.perf_counter()
    rows = {}
    for name in GENERATED_SOURCES:
        src = generated_source(name, args.side)
        cid = chain_id(name, "replicate", 0)
        frames, img = {0: src}, src
        grain = {}
        for k in range(1, args.steps + 1):
            req = EditRequest(image=img, prompt=setting.prompt(k), seed=step_seed(0, cid, k), config=dict(setting.config),
                              simulate=dict(setting.simulate), step=k)
            img = editor.edit(req).image
            grain[k] = grain_in_flat_areas(src, img)
            if k in steps:
                frames[k] = img
        first = {str(t): next((k for k in range(1, args.steps + 1) if grain[k] >= t), None) for t in (2, 3, 4)}
        scored = sorted(frames)
        scores = {m: dict(zip(scored, s.score_arrays([frames[k] for k in scored]), strict=True)) for m, s in scorers.items()}
        verdicts = {}
        for m, sc in scores.items():
            r = sensitivity(list(sc.values()), list(sc.keys()), [cid] * len(sc), lower_better=True)
            verdicts[m] = r["per_chain"][0]["passed"]
        rows[name] = {
            "grain": {k: round(grain[k], 2) for k in steps},
            "first_step_grain_at_least": first,
            "tint": {k: round(tint(frames[k]) - tint(src), 2) for k in steps},
            "scores": {m: {k: round(v, 3) for k, v in sc.items()} for m, sc in scores.items()},
            "passed": verdicts,
        }
        print(f"{name}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
    out = {"side": args.side, "steps": args.steps, "editor": repr(editor), "python": platform.python_version(),
           "sources": rows}
    write_results(args.out, out)
    print(f"\nside {args.side} px, {args.steps} steps; grain = std of new high frequencies in flat areas (grey levels)\n")
    print("| source | grain step 1 / 5 / 10 / 20 | first step >= 2 / 3 / 4 | tint step 10 / 20 / last | "
          "BRISQUE step 0 / 1 / 5 / 10 / 20 / last | passed: PIQE, NIQE, BRISQUE |")
    print("| --- | --- | --- | --- | --- | --- |")
    last = steps[-1]
    for name, r in rows.items():
        g, f, t, b = r["grain"], r["first_step_grain_at_least"], r["tint"], r["scores"]["brisque"]
        print(f"| {name} | {' / '.join(str(g[k]) for k in (1, 5, 10, 20) if k in g)} | "
              f"{' / '.join(str(f[x]) for x in ('2', '3', '4'))} | {t.get(10)} / {t.get(20)} / {t[last]} | "
              f"{' / '.join(f'{b[k]:.1f}' for k in (0, 1, 5, 10, 20, last) if k in b)} | "
              f"{', '.join({True: 'yes', False: 'no', None: 'n/a'}[r['passed'][m]] for m in ('piqe', 'niqe', 'brisque'))} |")


if __name__ == "__main__":
    main()
