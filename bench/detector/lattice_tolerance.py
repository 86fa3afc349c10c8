"""What version 12's lattice tolerance costs: a faint grid added once to a photograph, told the source.

    python -m bench.detector.lattice_tolerance [--out FILE]

Told the source, `edit_damage_rel` counts a lattice added beyond a share of the source's own amplitude, in quadrature
(`relative.LATTICE_TOLERANCE`: a quarter since version 12, the tenth grain keeps before). On skimage's astronaut,
coffee and chelsea (photographs whose own periodic part is 0.7-0.85 level), the validator's `grid` (a lattice of
period 8 px) is added at 1 to 2.5 levels, and the told lattice term is read under each tolerance: from how many
levels an added grid counts. No fit, no draw: the figures docs/edit-damage-history.md quotes for the choice.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import command_line, environment, results_path, write_results

PHOTOGRAPHS = ("astronaut", "coffee", "chelsea")
AMPLITUDES = (1.0, 1.5, 2.0, 2.5)
VERSION_11 = 0.1  # the lattice's tolerance before version 12: relative.TOLERANCE, as grain's


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(results_path(__file__)))
    args = ap.parse_args(argv)
    import skimage.data

    from banana100.metrics.detector import relative as rel
    from bench.detector.component_variants import constants
    from bench.detector.validate_edit_damage import grid

    tolerances = {"version 12": rel.LATTICE_TOLERANCE, "version 11": VERSION_11}
    stats_model = rel.StatsModel("cpu")
    rows = {}
    for name in PHOTOGRAPHS:
        photo = getattr(skimage.data, name)()
        source, *gridded = stats_model([photo, *(grid(photo, a) for a in AMPLITUDES)])
        row = {"own_lattice_level": round(source["lattice_level"], 3)}
        for label, tolerance in tolerances.items():
            with constants(rel, LATTICE_TOLERANCE=tolerance):  # relative_components reads it when called
                row[label] = {f"{a:g} levels": round(rel.relative_terms(rel.relative_components(s, source))["lattice"], 3)
                              for a, s in zip(AMPLITUDES, gridded, strict=True)}
        rows[name] = row
        print(f"{name} (own {row['own_lattice_level']:.2f} level): " + "; ".join(
            f"{label}: " + ", ".join(f"{k} {v:.2f}" for k, v in row[label].items()) for label in tolerances))
    write_results(Path(args.out), {"command": command_line("bench.detector.lattice_tolerance", argv or sys.argv[1:], {}),
                                   "environment": environment(), "grid_period_px": 8,
                                   "tolerances": tolerances, "told_lattice_term": rows})
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
