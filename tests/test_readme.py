"""The README's snippets run as written (issue 32, item 14): every python block, in a folder that is
not the clone's root, on small generated images; every `banana100` command line of its bash blocks
parses with the real command line's parser."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from fixtures.repopaths import PARAMS, REPO
from fixtures.runs import noise_images

README = REPO / "README.md"
NIQE_FILE = PARAMS / "niqe_modelparameters.mat"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README.read_text(), re.S | re.M)


RUNNER = """
import json, sys
for i, code in enumerate(json.load(open(sys.argv[1]))):
    print(f"-- block {i}", flush=True)
    exec(compile(code, f"README python block {i}", "exec"), {"__name__": "__main__"})  # each on its own
"""


@pytest.mark.integration  # a fresh process per block (~7 s)
def test_every_python_block_runs_as_written_outside_the_clone(tmp_path):
    blocks = _blocks("python")
    assert len(blocks) >= 2
    if not NIQE_FILE.is_file():  # the rest still runs: nothing else needs a parameter file
        blocks = [b for b in blocks if 'metric_path("niqe")' not in b]
        if not blocks:
            pytest.skip(f"needs {NIQE_FILE} (../shared)")
    noise_images(tmp_path, ("a.png", "b.jpg"))
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "run.py").write_text(RUNNER)
    env = {**os.environ, "BANANA100_WEIGHTS": str(PARAMS)}
    proc = subprocess.run([sys.executable, "run.py", "blocks.json"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("-- block") == len(blocks)
    assert "0.5" in proc.stdout.splitlines()[-1]  # the protocol block's failure rate


def test_every_banana100_command_line_parses():
    from banana100.cli import build_parser

    parser = build_parser()
    lines = [part.strip() for block in _blocks("bash") for line in block.splitlines()
             for part in line.split("&&") if part.strip().startswith(".venv/bin/banana100")]
    assert len(lines) >= 6
    for line in lines:
        argv = shlex.split(line, comments=True)[1:]
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"README: {line!r} does not parse")


def test_metric_path_from_any_folder(tmp_path, monkeypatch):
    from banana100 import metric_path
    from banana100.errors import UnknownMetricError
    from banana100.metrics.hub.publish import metrics_root

    monkeypatch.chdir(tmp_path)
    assert metric_path("NIQE") == str(metrics_root() / "niqe")  # the installed package's (a clone's metrics/)
    assert os.path.isabs(metric_path("niqe")) and os.path.isfile(os.path.join(metric_path("niqe"), "niqe.py"))
    assert os.path.isfile(os.path.join(metric_path("visualquality_r1"), "visualquality_r1.py"))
    with pytest.raises(UnknownMetricError, match="did you mean 'niqe'"):
        metric_path("nqie")


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_set_up_sizes_and_times_have_one_home():
    """docs/install.md states no measured size or time of its own: it points at BENCHMARKS.md, whose
    sections the links name (the README's link too)."""
    install = (REPO / "docs" / "install.md").read_text()
    figures = re.findall(r"\b\d[\d.,]*\s*(?:GB|MB|minutes|min)\b", install)
    assert not figures, f"docs/install.md repeats measured figures {figures}: point at BENCHMARKS.md instead"
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", (REPO / "BENCHMARKS.md").read_text(), re.M)}
    links = re.findall(r"BENCHMARKS\.md#([\w\-]+)", install + README.read_text())
    assert len(links) >= 3 and set(links) <= anchors, set(links) - anchors


def test_the_metric_count_comes_from_the_metric_table():
    """Issue 44 item 17: the README said "21 of them" beside 24 folders under metrics/; the unknown-metric
    errors listed 23 names, without edit_damage."""
    from banana100.errors import UnknownMetricError
    from banana100.metrics.resolve import resolve
    from banana100.metrics.table import DETECTORS, EVALUATORS, ROSTER, all_specs, get_metric, known_names

    with_module = [n for n in all_specs() if (REPO / "metrics" / n / f"{n}.py").is_file()]
    folders = {p.name for p in (REPO / "metrics").iterdir() if (p / f"{p.name}.py").is_file()}
    assert folders - set(with_module) == {"banana100_sensitivity"}  # the protocol's module, not a metric
    said = re.search(r"one evaluate module per metric \((\d+): the paper's (\d+), (.*?)\)", README.read_text())
    assert said and int(said.group(1)) == len(with_module) and int(said.group(2)) == len(ROSTER)
    assert said.group(3).split(", ") == [n for n in with_module if n not in ROSTER]
    for ask in (lambda: get_metric("nope"), lambda: resolve("nope")):
        with pytest.raises(UnknownMetricError) as e:
            ask()
        assert all(n in str(e.value) for n in known_names())
    assert {"edit_damage", "edit_damage_rel", "visualquality_r1"} <= set(known_names())
    assert "rali" not in known_names() and len(known_names()) == len(ROSTER) + 2 * len(DETECTORS) + len(EVALUATORS) - 1


def test_the_readme_stays_a_front_page():
    """The README is a front page (8 KB at most): detail goes to docs/, figures to BENCHMARKS.md."""
    assert len(README.read_bytes()) <= 8 * 1024, f"README.md is {len(README.read_bytes())} bytes"
