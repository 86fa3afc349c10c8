"""Which on-disk layout for the Banana100 dataset? Measure, don't guess.

    python -m bench.dataset.dataset_layout --images 2000 --size 2048 --work /tmp/b100bench

Makes a synthetic run folder of `--images` noisy 2K PNGs (a few distinct noisy base images,
PNG compress_level 1; each file made unique by a private tEXt chunk, so every image has its
own SHA-256 but decodes like the others) with a valid manifest, then for each candidate layout:

- `parquet`:     the toolkit's builder (`shards.write_shards`): Parquet shards <= 500 MiB, images embedded
- `imagefolder`: raw PNG files (one folder per chain, <= 100 files each) + `metadata.parquet`
                 with every schema field (`file_name` = relative path), loaded by the imagefolder builder
- `webdataset`:  tar shards of ~1 GB, `<key>.png` + `<key>.json`, loaded by the webdataset builder

measures: build time, folder size and file count, `load_dataset(folder)` time (the Arrow cache
it writes, and its size), decode throughput over `--decode` rows (against raw PIL decoding of the
same files), streaming first-row latency and streaming throughput, and the peak RSS of each step
(each step runs in its own subprocess). Prints a Markdown table and writes JSON next to it.

Every layout is deleted after it is measured (disk); the synthetic run folder at the end.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import REPO, RESULTS, write_results


# ------------------------------------------------------------------ synthetic data

def _base_png(i: int, size: int) -> bytes:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(i)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32)
    phase = rng.uniform(0, 6.28, 3)
    base = np.stack([100 + 90 * np.sin(x / (150 + 40 * i) + phase[c]) * np.cos(y / 210 + phase[c]) for c in range(3)], -1)
    a = np.clip(base + rng.normal(0, 3 + i % 3, base.shape).astype(np.float32), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _with_text(png: bytes, text: str) -> bytes:
    """`png` with a tEXt chunk before IEND: new bytes, same pixels."""
    data = b"banana100\x00" + text.encode()
    chunk = len(data).to_bytes(4, "big") + b"tEXt" + data + zlib.crc32(b"tEXt" + data).to_bytes(4, "big")
    return png[:-12] + chunk + png[-12:]


def make_run(run_dir: Path, n: int, size: int, bases: int = 6, steps_per_chain: int = 100) -> None:
    from concurrent.futures import ProcessPoolExecutor

    from banana100.chains.manifest import sha256_bytes

    with ProcessPoolExecutor(2) as pool:
        pngs = list(pool.map(_base_png, range(bases), [size] * bases))
    run_dir.mkdir(parents=True)
    lines = []
    n_chains = -(-n // steps_per_chain)
    k = 0
    for c in range(n_chains):
        setting = ("replicate", "mirror", "recolor", "reword")[c % 4]
        cid = f"src{c:03d}__{setting}__r0"
        (run_dir / cid).mkdir()
        parent = None
        for step in range(steps_per_chain):
            if k >= n:
                break
            data = _with_text(pngs[(c + step) % bases], f"{cid}/{step}")
            rel = f"{cid}/step_{step:03d}.png"
            (run_dir / rel).write_bytes(data)
            sha = sha256_bytes(data)
            lines.append(json.dumps({
                "chain_id": cid, "source_id": f"src{c:03d}", "setting": setting, "repeat": 0, "step": step,
                "image": rel, "sha256": sha, "parent_sha256": parent,
                "prompt": None if step == 0 else "Produce an exact replica of the provided image, with no alterations.",
                "editor": "source" if step == 0 else "simulated", "model": "source" if step == 0 else "simulated-v1",
                "seed": None if step == 0 else step, "width": size, "height": size,
            }))
            parent = sha
            k += 1
    (run_dir / "manifest.jsonl").write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------ layouts (run in subprocesses)

def build_parquet(run_dir: Path, out: Path) -> None:
    from collections import defaultdict

    from banana100.dataset.checks import collect_items
    from banana100.dataset.layout import dataset_features
    from banana100.dataset.shards import finalize_shards, write_shards

    items = collect_items([run_dir])
    feats = dataset_features()
    by_setting = defaultdict(list)
    for it in items:
        by_setting[it.record["setting"]].append(it)
    for s, its in by_setting.items():
        write_shards(its, out / "data" / s, feats, 500 * 1024**2, s)
        finalize_shards(out / "data" / s)


def build_imagefolder(run_dir: Path, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from banana100.dataset.checks import collect_items
    from banana100.schema import RECORD_FIELDS

    items = collect_items([run_dir])
    rows = []
    for it in items:
        rel = Path("data") / it.record["setting"] / it.record["image"]
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(it.path, out / rel)
        row = {f.name: it.record.get(f.name) for f in RECORD_FIELDS if f.name != "image"}
        row["file_name"] = Path(it.record["image"]).as_posix()
        rows.append(row)
    by_setting: dict[str, list] = {}
    for r in rows:
        by_setting.setdefault(r["setting"], []).append(r)
    for s, rs in by_setting.items():
        pq.write_table(pa.Table.from_pylist(rs), out / "data" / s / "metadata.parquet")


def build_webdataset(run_dir: Path, out: Path, shard_bytes: int = 1024**3) -> None:
    from banana100.dataset.checks import collect_items
    from banana100.schema import RECORD_FIELDS

    items = collect_items([run_dir])
    (out / "data").mkdir(parents=True)
    shard, size, tar = 0, 0, None
    for it in items:
        data = it.path.read_bytes()
        if tar is None or size + len(data) > shard_bytes:
            if tar is not None:
                tar.close()
            tar = tarfile.open(out / "data" / f"train-{shard:05d}.tar", "w")
            shard, size = shard + 1, 0
        key = f"{it.record['chain_id']}__{it.record['step']:03d}"
        meta = json.dumps({f.name: it.record.get(f.name) for f in RECORD_FIELDS if f.name != "image"}).encode()
        for name, payload in ((f"{key}.png", data), (f"{key}.json", meta)):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
        size += len(data) + len(meta) + 2048
    tar.close()


BUILDERS = {"parquet": build_parquet, "imagefolder": build_imagefolder, "webdataset": build_webdataset}


def step_build(layout: str, run_dir: str, out: str) -> dict:
    if layout.startswith("parquet-rg"):  # variant: row groups of at most N MiB (`parquet-rg32`)
        from banana100.dataset import shards

        shards.ROW_GROUP_MAX_BYTES = int(layout[len("parquet-rg"):]) * 1024**2
        layout = "parquet"
    t = time.perf_counter()
    BUILDERS[layout](Path(run_dir), Path(out))
    return {"build_s": time.perf_counter() - t}


def step_load(layout: str, out: str, cache: str, n_decode: int) -> dict:
    import datasets

    datasets.disable_progress_bars()
    t = time.perf_counter()
    ds = datasets.load_dataset(out, split="train", cache_dir=cache)
    load_s = time.perf_counter() - t
    col = "image" if "image" in ds.column_names else "png"  # webdataset: the column is the file extension
    n = min(n_decode, len(ds))
    t = time.perf_counter()
    for i in range(n):
        ds[i * (len(ds) // n)][col].load()
    dec = time.perf_counter() - t
    raw = ds.cast_column(col, datasets.Image(decode=False))
    t = time.perf_counter()
    for i in range(n):
        raw[i * (len(ds) // n)][col]
    rawacc = time.perf_counter() - t
    return {"rows": len(ds), "columns": ds.column_names, "load_s": load_s, "decode_img_s": n / dec,
            "bytes_access_img_s": n / rawacc}


def step_stream(layout: str, out: str, n_decode: int) -> dict:
    import datasets

    datasets.disable_progress_bars()
    t = time.perf_counter()
    ds = datasets.load_dataset(out, split="train", streaming=True)
    it = iter(ds)
    first = next(it)
    col = "image" if "image" in first else "png"
    first[col].load()
    first_s = time.perf_counter() - t
    t = time.perf_counter()
    k = 1
    for row in it:
        row[col].load()
        k += 1
        if k >= n_decode:
            break
    return {"stream_first_row_s": first_s, "stream_img_s": (k - 1) / (time.perf_counter() - t)}


def step_pil(run_dir: str, n_decode: int) -> dict:
    from PIL import Image

    lines = (Path(run_dir) / "manifest.jsonl").read_text().splitlines()
    n = min(n_decode, len(lines))
    paths = [Path(run_dir) / json.loads(lines[i * (len(lines) // n)])["image"] for i in range(n)]
    t = time.perf_counter()
    for p in paths:
        with Image.open(p) as im:
            im.load()
    return {"pil_decode_img_s": n / (time.perf_counter() - t)}


def _child(fn: str, *args) -> dict:
    """Run step `fn` in a fresh interpreter; return its result plus its peak RSS (MiB)."""
    code = (
        "import json, resource, sys; sys.path.insert(0, %r); from bench.dataset import dataset_layout as b; "
        "r = getattr(b, %r)(*json.loads(sys.argv[1])); "
        "r['peak_rss_mib'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024; print('RESULT' + json.dumps(r))"
    ) % (str(REPO), fn)
    p = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], capture_output=True, text=True)
    if p.returncode:
        return {"error": p.stderr[-2000:]}
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[6:])


def _du(path: Path) -> tuple[int, int, int]:
    total, files, per_dir = 0, 0, 0
    for root, _, names in os.walk(path):
        per_dir = max(per_dir, len(names))
        for n in names:
            total += os.path.getsize(os.path.join(root, n))
            files += 1
    return total, files, per_dir


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--decode", type=int, default=200, help="rows decoded for each throughput figure")
    ap.add_argument("--work", type=Path, default=Path("/tmp/b100bench"))
    ap.add_argument("--layouts", default="parquet,imagefolder,webdataset")
    ap.add_argument("--out", type=Path, default=RESULTS / "dataset" / "dataset_layout.json")
    ap.add_argument("--keep-run", action="store_true")
    ap.add_argument("--subset", type=int, default=0, help="use only the first N images of the run (variants)")
    args = ap.parse_args()

    run_dir = args.work / "run"
    results: dict = {"images": args.images, "size": args.size, "decode_rows": args.decode, "cpus": os.cpu_count()}
    if not (run_dir / "manifest.jsonl").exists():
        shutil.rmtree(args.work, ignore_errors=True)
        t = time.perf_counter()
        make_run(run_dir, args.images, args.size)
        results["synth_s"] = time.perf_counter() - t
    if args.subset:
        sub = args.work / f"run-{args.subset}"
        if not sub.exists():
            sub.mkdir()
            lines = (run_dir / "manifest.jsonl").read_text().splitlines()[: args.subset]
            for line in lines:
                rel = json.loads(line)["image"]
                (sub / rel).parent.mkdir(exist_ok=True)
                os.link(run_dir / rel, sub / rel)
            (sub / "manifest.jsonl").write_text("\n".join(lines) + "\n")
        run_dir = sub
        results["images"] = args.subset
    src_bytes, src_files, _ = _du(run_dir)
    results["source_bytes"] = src_bytes
    results["mean_image_mib"] = src_bytes / max(1, src_files - 1) / 1024**2
    print(f"run folder: {src_files - 1} images, {src_bytes / 1024**3:.2f} GiB", flush=True)
    results["pil"] = _child("step_pil", str(run_dir), args.decode)
    print("pil", results["pil"], flush=True)
    for layout in args.layouts.split(","):
        out = args.work / layout
        cache = args.work / f"cache-{layout}"
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        r = {"build": _child("step_build", layout, str(run_dir), str(out))}
        size, files, per_dir = _du(out)
        r.update(folder_bytes=size, files=files, max_files_per_folder=per_dir)
        r["load"] = _child("step_load", layout, str(out), str(cache), args.decode)
        r["cache_bytes"] = _du(cache)[0]
        shutil.rmtree(cache, ignore_errors=True)
        r["stream"] = _child("step_stream", layout, str(out), min(args.decode, 100))
        results[layout] = r
        print(layout, json.dumps(r), flush=True)
        shutil.rmtree(out, ignore_errors=True)
        write_results(args.out, results)
    if not args.keep_run:
        shutil.rmtree(args.work, ignore_errors=True)
    write_results(args.out, results)
    print(table(results))


def table(res: dict) -> str:
    pil = res["pil"]["pil_decode_img_s"]
    rows = ["| layout | build s | folder GiB | files (max/folder) | load_dataset s | Arrow cache GiB | decode img/s (x raw PIL) "
            "| stream 1st row s | stream img/s | peak RSS MiB build / load / stream |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in [k for k in res if isinstance(res[k], dict) and "build" in res[k]]:
        r = res.get(name)
        if not r:
            continue
        b, ld, st = r["build"], r["load"], r["stream"]
        if "error" in ld or "error" in st or "error" in b:
            rows.append(f"| {name} | error: {(b.get('error') or ld.get('error') or st.get('error'))[-200:]!r} |")
            continue
        rows.append(
            f"| {name} | {b['build_s']:.0f} | {r['folder_bytes'] / 1024**3:.2f} | {r['files']} ({r['max_files_per_folder']}) "
            f"| {ld['load_s']:.1f} | {r['cache_bytes'] / 1024**3:.2f} | {ld['decode_img_s']:.1f} ({ld['decode_img_s'] / pil:.2f}) "
            f"| {st['stream_first_row_s']:.2f} | {st['stream_img_s']:.1f} "
            f"| {b['peak_rss_mib']:.0f} / {ld['peak_rss_mib']:.0f} / {st['peak_rss_mib']:.0f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
