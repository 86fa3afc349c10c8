"""Banana100: recursive image-editing degradation chains and the NR-IQA metrics that miss them.

One library shared by the CLI, the evaluate modules (`metrics/`), the dataset builder
(`dataset_script/`) and the Gradio Space (`space/`); its parts are described in
docs/architecture.md. For library users, the main entry points are importable from here:

    from pathlib import Path
    from banana100 import MetricScorer, make_editor, generate_chains, build_dataset, score_to_parquet

    editor = make_editor("simulated")
    generate_chains(editor, "photos/", "replicate", steps=100, repeats=5, out_dir="runs/replicate")
    build_dataset([Path("runs/replicate")], Path("banana100-dataset"))
    score_to_parquet("banana100-dataset", ["piqe", "niqe"], "scores.parquet")
    MetricScorer("piqe").score(["runs/replicate/coffee__replicate__r0/step_100.png"])

They are loaded on first use, so `import banana100` stays light (no torch until a scorer is
needed).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> the module that defines it (one home each; see docs/architecture.md)
_PUBLIC = {
    "MetricScorer": "banana100.metrics.engine.scorer",
    "get_metric": "banana100.metrics.table",
    "metric_path": "banana100.metrics.hub.publish",
    "sensitivity": "banana100.protocol",
    "make_editor": "banana100.chains.editors",
    "Editor": "banana100.chains.editors.base",
    "generate_chains": "banana100.chains.runner",
    "import_chains": "banana100.chains.importer",
    "build_dataset": "banana100.dataset.build",
    "verify_dataset": "banana100.dataset.verify",
    "score_to_parquet": "banana100.scoring",
    "Banana100Error": "banana100.errors",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'banana100' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
