"""What the bench scripts share: the repository's paths, a timer, and writing a script's one
current results file. A script run as `python bench/<script>.py` imports this module as its
neighbour; the library (`banana100`, its test images in `banana100.testing`) comes from the
installed (editable) package: no script edits sys.path.

    from bench.benchtools import PARAMS, REPO, best_time, write_results
"""

from __future__ import annotations

import atexit
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from banana100.fileio import write_file_atomic

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"  # one folder per topic, as the scripts are laid out
SHARED = REPO.parent / "shared"  # the read-only folder beside the repository (parameter files, reference images)
PARAMS = SHARED / "iqa-params"


def command_line(module: str, argv: list[str], scratch: dict[str | None, str]) -> str:
    """`python -m module ARGS` as a results file records it: each argument that is one of `scratch`'s paths (a fit
    cache, a folder of chains: files of one's own) shown by its placeholder instead (FIT.json, DIR), as the docs
    name it."""
    shown = [scratch.get(a, a) for a in argv]
    return " ".join(["python -m", module, *shown])


def scratch_dir(prefix: str = "banana100-bench-") -> Path:
    """A fresh folder under the system's temporary one, removed when the process exits: the scripts
    run inside the tests, and each leftover (untrained checkpoints, old modules) stayed in /tmp."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def best_time(fn, repeats: int, clock=time.perf_counter, warm_up: bool = True):
    """(shortest of `repeats` timed calls of fn on `clock`, what the last call returned)."""
    if warm_up:
        fn()  # caches, allocator
    best, out = float("inf"), None
    for _ in range(repeats):
        t = clock()
        out = fn()
        best = min(best, clock() - t)
    return best, out


def alternating(ways: dict, repeats: int, after=None, clock=time.perf_counter):
    """Each way (name -> fn(round)) timed `repeats` times, the ways taking turns round by round so that load
    on the machine hits them alike; `after(name, round)`, untimed, after each call (clean-up). Returns
    ({name: seconds of each round}, {name: median seconds})."""
    times = {name: [] for name in ways}
    for r in range(repeats):
        for name, fn in ways.items():
            t = clock()
            fn(r)
            times[name].append(clock() - t)
            if after is not None:
                after(name, r)
    return times, {name: statistics.median(v) for name, v in times.items()}


def environment() -> dict:
    """The machine and library versions a result was measured with."""
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "machine": platform.machine(),
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


def results_path(script: str, suffix: str = "") -> Path:
    """bench/results/<topic>/<script><suffix>.json for the script at bench/<topic>/<script>.py
    (`bench_` dropped): one current file per script (git keeps the old ones)."""
    script = Path(script)
    return RESULTS / script.parent.name / f"{script.stem.removeprefix('bench_')}{suffix}.json"


def write_results(path: Path, results: dict) -> Path:
    """Write `results` as indented JSON to `path`, whole or not at all and fsynced
    (`banana100.fileio.write_file_atomic`: a temporary file beside it, fsync, rename)."""
    path = Path(path)
    write_file_atomic(path, (json.dumps(results, indent=1) + "\n").encode())
    return path


def module_as_of(where: str, path: str | tuple[str, ...], name: str):
    """The module at `path` (relative to the repository; several: the first that exists at that
    commit, for a module that moved) as it was at commit `where`, or as the file `where` holds (a
    copy without git history), importing today's library: the baseline of a side-by-side bench."""
    import importlib.util
    import subprocess

    if Path(where).is_file():
        source = Path(where).read_text()
    else:
        for candidate in (path,) if isinstance(path, str) else path:
            shown = subprocess.run(["git", "-C", str(REPO), "show", f"{where}:{candidate}"], capture_output=True, text=True)
            if shown.returncode == 0:
                break
        shown.check_returncode()
        source = shown.stdout
    file = scratch_dir("bench-module-") / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

