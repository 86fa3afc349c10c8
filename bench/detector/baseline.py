"""The edit_damage detector as of a commit, for the side-by-side benches (cost, memory, hard images)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.benchtools import module_as_of

# where the detector's module has lived, newest first (module_as_of takes the first a commit has)
MODEL = ("banana100/metrics/detector/model.py", "banana100/metrics/native/edit_damage.py")
FILTERS = "banana100/metrics/detector/filters.py"  # model.py's image-processing steps, since 76a027a


def detector_as_of(where: str, name: str = "edit_damage_baseline"):
    """The detector's module as of commit `where` (or as the file `where` holds), with that commit's image-processing
    steps too. Since 76a027a they live in filters.py, which model.py imports from today's library: bound to today's,
    a baseline would run today's filters, and a change there would read as no change. A file without history keeps
    today's filters."""
    from banana100.metrics.detector import filters as today

    module = module_as_of(where, MODEL, name)
    if Path(where).is_file():
        return module
    try:
        then = module_as_of(where, FILTERS, f"{name}_filters")
    except subprocess.CalledProcessError:  # before 76a027a model.py held them itself
        return module
    for key, value in vars(then).items():
        if not key.startswith("__") and key in vars(module) and vars(module)[key] is getattr(today, key, None):
            setattr(module, key, value)
    return module
