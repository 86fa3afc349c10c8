"""What writing Parquet shards through a Python file (`shards._KeptErrorsFile`, which keeps a full disk's
error from Arrow: Arrow aborted the process on it) costs against Arrow's own file (`pa.OSFile`, before).

    python -m bench.dataset.shard_sink_cost --images 400 --side 512 --repeats 3

Writes the same synthetic run (noisy PNGs) with `shards.write_shards` both ways, alternately, `--repeats`
times each into a fresh folder, and reports the median seconds and their ratio; results in
bench/results/dataset/shard_sink_cost.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import alternating, results_path, write_results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--side", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import numpy as np
    from PIL import Image

    from banana100.chains.manifest import sha256_bytes
    from banana100.dataset import shards
    from banana100.dataset.checks import Item
    from banana100.dataset.layout import dataset_features

    work = Path(tempfile.mkdtemp(prefix="b100-sink-"))
    rng = np.random.default_rng(0)
    items = []
    for k in range(args.images):
        path = work / "run" / f"{k:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (args.side, args.side, 3), np.uint8)).save(path, compress_level=1)
        data = path.read_bytes()
        record = {"chain_id": f"c{k // 21}", "step": k % 21, "image": path.name, "sha256": sha256_bytes(data),
                  "width": args.side, "height": args.side}
        items.append(Item(run_dir=path.parent, record=record))
    size = sum(i.path.stat().st_size for i in items)

    kept_sink = shards.open_sink

    def osfile_sink(path):  # before: Arrow's own file (a write error raised inside Arrow)
        class Nothing:
            def close(self):
                pass

            def raise_kept(self):
                pass

        return Nothing(), pa.OSFile(str(path), "wb")

    def writing(name, sink):
        def write(r):
            shards.open_sink = sink
            shards.write_shards(items, work / f"out-{name}-{r}", dataset_features(), 500 * 1024**2, name)
        return write

    sinks = {"osfile": osfile_sink, "kept_errors_file": kept_sink}
    times, med = alternating({name: writing(name, sink) for name, sink in sinks.items()}, args.repeats,
                             after=lambda name, r: shutil.rmtree(work / f"out-{name}-{r}"))
    shards.open_sink = kept_sink
    shutil.rmtree(work)
    result = {"images": args.images, "side": args.side, "bytes": size, "repeats": args.repeats, "seconds": times,
              "median_s": med, "ratio_kept_over_osfile": med["kept_errors_file"] / med["osfile"],
              "command": f"python -m bench.dataset.shard_sink_cost --images {args.images} --side {args.side} "
                         f"--repeats {args.repeats}"}
    write_results(results_path(__file__), result)
    print(json.dumps({k: result[k] for k in ("bytes", "median_s", "ratio_kept_over_osfile")}, indent=1))


if __name__ == "__main__":
    main()
