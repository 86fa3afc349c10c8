"""Install size of banana100's light core and of each extra, measured in real fresh venvs.

    python -m bench.install.bench_install_size [--wheel dist/banana100-*.whl] [--work /tmp/b100-size]

1. builds the wheel (setuptools' PEP 517 hook, offline) unless --wheel is given;
2. an empty venv (pip, setuptools<81, wheel as setup.sh installs them) is the baseline;
3. `core`: a fresh venv, torch==2.14.1 (setup.sh's pin), then the wheel: its size over the
   baseline, split into torch with what only torch needs (CUDA libraries, triton, sympy, ...)
   and the rest;
4. each extra (deep, gemini, space, all): a hard-linked copy of the core venv, then
   `pip install "WHEEL[extra]"`: the size it adds on top of the core, and its largest packages;
5. in the core venv: `banana100 demo` runs, pyiqa / google.genai / gradio are absent, and a deep
   metric says which extra to install (the light core works on its own).

Sizes are apparent bytes of the venv folders (`du -sb`), in MB (10^6). Writes
bench/results/install/install_size.json. Needs the package index (or pip's cache) for the dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file, not with -m: the repository root on the path, as -m puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.benchtools import REPO, RESULTS, write_results

EXTRAS = ("deep", "gemini", "space", "all")
TORCH_PIN = ("torch==2.14.1",)  # setup.sh's pin (torchvision is the deep extra's)

SIZES_OF_DISTS = r"""
import json, os, sys, importlib.metadata as md
from packaging.requirements import Requirement
site = sys.argv[1]
norm = lambda n: n.lower().replace("_", "-").replace(".", "-")
out = {}
for d in md.distributions(path=[site]):
    size = 0
    for f in d.files or ():
        p = os.path.join(site, f)
        if os.path.isfile(p) and not os.path.islink(p):
            size += os.path.getsize(p)
    extras = [""] + list(d.metadata.get_all("Provides-Extra") or [])
    deps = {e: [] for e in extras}  # extra ("" = none) -> [[name, [its extras]], ...] in this environment
    for text in d.requires or []:
        r = Requirement(text)
        for e in extras:
            if r.marker is None or r.marker.evaluate({"extra": e}):
                if e == "" or r.marker is not None:  # an unmarked requirement belongs to "" only
                    deps[e].append([norm(r.name), sorted(r.extras)])
    out[norm(d.metadata["Name"])] = {"size": size, "deps": deps, "version": d.version}
print(json.dumps(out))
"""

def run(cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def du(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def dists(venv: Path) -> dict:
    py = venv / "bin" / "python"
    return json.loads(subprocess.run([str(py), "-c", SIZES_OF_DISTS, str(site_packages(venv))],
                                     capture_output=True, text=True, check=True).stdout)


def closure(root: str, table: dict, stop: frozenset = frozenset(), extras=()) -> set[str]:
    """Packages `root` (with `extras`) needs, following requirements' own extras
    (datasets needs fsspec[http], which brings aiohttp)."""
    seen, todo = set(), [(root, tuple(extras))]
    visited = set()
    while todo:
        name, ex = todo.pop()
        if (name, ex) in visited or name in stop or name not in table:
            continue
        visited.add((name, ex))
        seen.add(name)
        deps = table[name]["deps"]
        for e in ("", *ex):
            for dep, dep_extras in deps.get(e, []):
                todo.append((dep, tuple(dep_extras)))
    return seen


def torch_part(table: dict, core_roots: list[str], baseline: set[str]) -> set[str]:
    """What the core venv holds only because of torch: every package that neither banana100,
    nor its other requirements (followed without going through torch), nor the empty venv has.
    (torch's CUDA libraries come through cuda-toolkit's extras, so torch's own requirement
    closure would miss them.)"""
    others = {"banana100"} | baseline
    for r, extras in core_roots:
        if r != "torch":
            others |= closure(r, table, stop=frozenset({"torch"}), extras=extras)
    return set(table) - others


def new_venv(path: Path) -> Path:
    run([sys.executable, "-m", "venv", str(path)])
    run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip", "setuptools<81", "wheel"])
    return path


def build_wheel(work: Path) -> Path:
    src = work / "src"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, files):
        rel = f.decode()
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    out = subprocess.run([sys.executable, "-c", "import setuptools.build_meta as b; print(b.build_wheel('dist'))"],
                         cwd=src, capture_output=True, text=True, check=True).stdout.split()[-1]
    return src / "dist" / out


def mb(n: int) -> float:
    return round(n / 1e6, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, default=None)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "banana100-install-size")
    ap.add_argument("--out", type=Path, default=RESULTS / "install" / "install_size.json")
    args = ap.parse_args()
    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    t0 = time.time()
    wheel = args.wheel or build_wheel(args.work)
    results = {"wheel": wheel.name, "python": sys.version.split()[0], "torch_pin": TORCH_PIN[0], "extras": {}}

    empty = new_venv(args.work / "empty")
    base = du(empty)
    results["empty_venv_mb"] = mb(base)

    core = new_venv(args.work / "core")
    run([str(core / "bin" / "python"), "-m", "pip", "install", "-q", *TORCH_PIN])
    run([str(core / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    core_size = du(core) - base
    table = dists(core)
    core_roots = table["banana100"]["deps"][""]
    torch_only = torch_part(table, core_roots, set(dists(empty)))
    torch_bytes = sum(table[n]["size"] for n in torch_only)
    results["core"] = {
        "total_mb": mb(core_size),
        "torch_and_what_only_it_needs_mb": mb(torch_bytes),
        "without_torch_mb": mb(core_size - torch_bytes),
        "torch_only_packages": sorted(torch_only),
        "packages": len(table),
        "largest": sorted(((n, mb(v["size"])) for n, v in table.items()), key=lambda x: -x[1])[:12],
    }

    # the light core works alone: no pyiqa, no google-genai, no gradio; the demo runs
    py = str(core / "bin" / "python")
    absent = subprocess.run([py, "-c", "import importlib.util as u; print([m for m in ('pyiqa','google.genai','gradio','timm','cv2') "
                                       "if (u.find_spec(m.split('.')[0]) and u.find_spec(m))])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    demo_dir = args.work / "demo"
    demo = subprocess.run([str(core / "bin" / "banana100"), "demo", "--out", str(demo_dir), "--steps", "20", "--chains", "2"],
                          capture_output=True, text=True, cwd=args.work, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    deep = subprocess.run([str(core / "bin" / "banana100"), "score", str(demo_dir / "run"), "--metrics", "topiq_nr",
                           "--out", str(args.work / "s.parquet")], capture_output=True, text=True, cwd=args.work)
    results["core"]["check"] = {
        "optional_modules_present": absent,
        "demo_exit_status": demo.returncode,
        "demo_report": (demo_dir / "report" / "report.md").is_file(),
        "deep_metric_exit_status": deep.returncode,
        "deep_metric_message": deep.stderr.strip()[-400:],
    }

    for extra in EXTRAS:
        venv = args.work / f"core+{extra}"
        run(["cp", "-al", str(core), str(venv)])
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[{extra}]"])
        added = du(venv) - base - core_size
        after = dists(venv)
        new = {n: v["size"] for n, v in after.items() if n not in table}
        results["extras"][extra] = {
            "added_mb": mb(added),
            "new_packages": len(new),
            "largest_new": sorted(((n, mb(s)) for n, s in new.items()), key=lambda x: -x[1])[:12],
        }
        shutil.rmtree(venv)
    results["seconds"] = round(time.time() - t0)
    write_results(args.out, results)
    print(json.dumps(results, indent=1))
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
