"""Metric cards: generated from the metric table, committed, and in agreement with it."""

from __future__ import annotations

import shutil

import pytest
import yaml

from banana100.metrics.hub.cards import format_range, main, render_metric_card, write_metric_cards
from banana100.metrics.table import ROSTER, get_metric

from fixtures.repopaths import REPO
METRICS_DIR = REPO / "metrics"
CARDS = ROSTER  # every roster metric has a module folder and a card


def header(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


@pytest.mark.parametrize("name", CARDS)
def test_committed_card_is_the_generated_one(name):
    committed = (METRICS_DIR / name / "README.md").read_text(encoding="utf-8")
    assert committed == render_metric_card(name), (
        f"metrics/{name}/README.md is out of date with the metric table: run `python -m banana100.metrics.hub.cards`"
    )


@pytest.mark.parametrize("name", CARDS)
def test_yaml_header(name):
    meta = header(render_metric_card(name))
    spec = get_metric(name)
    assert meta["title"] == spec.display_name
    assert meta["emoji"]
    assert {"evaluate", "metric"} <= set(meta["tags"])
    assert spec.direction in meta["description"]


@pytest.mark.parametrize("name", CARDS)
def test_card_agrees_with_the_table(name):
    spec = get_metric(name)
    card = render_metric_card(name)
    assert f"**Direction:** {spec.direction}." in card
    other = "higher is better" if spec.lower_better else "lower is better"
    assert other not in card
    assert f"**Nominal range:** {format_range(spec)}." in card
    assert f"**lower_better** (`bool`): `{spec.lower_better}`" in card
    assert f"**Minimum size:** {spec.min_size}x{spec.min_size} pixels" in card
    for wf in spec.all_files:
        assert f"`{wf.filename}`" in card
        if wf.sha256:
            assert wf.sha256 in card
        if wf.sha256_prefix:
            assert f"starts `{wf.sha256_prefix}`" in card
        assert wf.download_url in card
        assert wf.licence in card
        assert f"| `{wf.filename}` | {wf.role} |" in card
    assert f"**Input size handling (pyiqa's own, kept as is):** {spec.resize}" in card
    assert "**GPU memory:**" in card and "**Precision:**" in card
    assert f"**Family:** {spec.family}." in card
    if spec.original_code:
        assert spec.original_code in card
    assert "BANANA100_WEIGHTS" in card if spec.all_files else "needs no parameter file" in card
    assert spec.citation in card and spec.paper in card
    assert "PolyForm Noncommercial 1.0.0" in card and "Apache-2.0" in card
    assert f'evaluate.load("metrics/{name}")' in card


def test_licences_per_metric():
    assert "LIVE" in render_metric_card("niqe") and "LIVE" in render_metric_card("brisque")
    assert "Apache-2.0 (IceClear/IL-NIQE)" in render_metric_card("ilniqe")
    assert "acknowledge LIVE" not in render_metric_card("piqe")


def test_ranges_are_formatted_from_the_table():
    assert format_range(get_metric("piqe")) == "0 to 100"
    assert format_range(get_metric("niqe")) == "0 and up (no fixed upper bound)"


def test_write_and_check(tmp_path, capsys):
    shutil.copytree(METRICS_DIR, tmp_path / "metrics", ignore=shutil.ignore_patterns("__pycache__"))
    written = write_metric_cards(tmp_path / "metrics")
    names = {p.parent.name for p in written}
    assert set(CARDS) <= names  # a card for every module folder present
    assert main(["--metrics-dir", str(tmp_path / "metrics"), "--check"]) == 0
    stale = tmp_path / "metrics" / "niqe" / "README.md"
    stale.write_text(stale.read_text().replace("lower is better", "higher is better"))
    assert main(["--metrics-dir", str(tmp_path / "metrics"), "--check"]) == 1
    assert "niqe/README.md" in capsys.readouterr().out
    assert main(["--metrics-dir", str(tmp_path / "metrics")]) == 0
    assert stale.read_text() == render_metric_card("niqe")


def test_repository_cards_are_current():
    assert main(["--metrics-dir", str(METRICS_DIR), "--check"]) == 0


def test_every_roster_metric_has_a_module_and_card():
    for name in ROSTER:
        module = METRICS_DIR / name / f"{name}.py"
        assert module.is_file(), f"no module for {name}"
        text = module.read_text(encoding="utf-8")
        assert f'METRIC_NAME = "{name}"' in text and "import banana100.metrics.module as em" in text
        assert (METRICS_DIR / name / "README.md").is_file()


@pytest.mark.integration
def test_table_agrees_with_pyiqa_configs():
    """Direction and pyiqa config of every roster metric match pyiqa's DEFAULT_CONFIGS."""
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    for name in ROSTER:
        cfg = DEFAULT_CONFIGS[name]
        assert cfg["metric_mode"] == "NR", name
        assert get_metric(name).lower_better == cfg.get("lower_better", False), name


def test_brisque_card_states_the_bound_seen_on_a_held_out_photograph():
    card = render_metric_card("brisque")
    assert "held-out photograph" in card and "0.026" in card and "grid-step effect" in card
