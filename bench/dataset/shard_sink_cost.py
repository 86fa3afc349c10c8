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
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa


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

    times = {"osfile": [], "kept_errors_file": []}
    for r in range(args.repeats):
        for name, sink in (("osfile", osfile_sink), ("kept_errors_file", kept_sink)):
            out = work / f"out-{name}-{r}"
            shards.open_sink = sink
            t = time.perf_counter()
            shards.write_shards(items, out, dataset_features(), 500 * 1024**2, name)
            times[name].append(time.perf_counter() - t)
            shutil.rmtree(out)
    shards.open_sink = kept_sink
    shutil.rmtree(work)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {"images": args.images, "side": args.side, "bytes": size, "repeats": args.repeats, "seconds": times,
              "median_s": med, "ratio_kept_over_osfile": med["kept_errors_file"] / med["osfile"],
              "command": f"python -m bench.dataset.shard_sink_cost --images {args.images} --side {args.side} "
                         f"--repeats {args.repeats}"}
    out = Path(__file__).resolve().parents[1] / "results" / "dataset" / "shard_sink_cost.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("bytes", "median_s", "ratio_kept_over_osfile")}, indent=1))


if __name__ == "__main__":
    main()
