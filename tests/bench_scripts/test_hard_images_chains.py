"""bench/detector/hard_images.py --chains: the development chains' figures, bare and told the source, are those of
the scores it reads (what a detector change is looked at on before a held-out draw is scored once)."""

from __future__ import annotations

import numpy as np
import pytest

from banana100.metrics.detector import model
from banana100.metrics.detector.relative import relative_score


def _chain(seed: int, rising: bool) -> dict[str, np.ndarray]:
    """Steps 0, 1, 5, 10, 20 of a grey ramp with noise that grows with the step (or falls after step 1)."""
    rng = np.random.default_rng(seed)
    base = np.tile(np.linspace(60, 190, 96), (96, 1))
    sigma = {0: 0.0, 1: 2.0, 5: 4.0, 10: 6.0, 20: 8.0} if rising else {0: 0.0, 1: 8.0, 5: 2.0, 10: 2.0, 20: 2.0}
    return {f"s{k}": np.repeat(np.clip(base + rng.normal(0, s, base.shape) + 0.5, 0, 255).astype(np.uint8)[..., None],
                               3, axis=2) for k, s in sigma.items()}


def test_the_development_figures_are_the_scores_bare_and_told_the_source(tmp_path):
    from bench.detector.hard_images import _families, _scorer

    chains = {"grain__a": _chain(1, True), "grain__b": _chain(2, True), "grain__c": _chain(3, False)}
    for name, steps in chains.items():
        np.savez_compressed(tmp_path / f"{name}.npz", **steps)
    score = _scorer(model)
    fam = _families(tmp_path, score)["grain"]
    scored = {n: {int(k[1:]): score(a) for k, a in steps.items()} for n, steps in chains.items()}
    told = {n: {k: relative_score(v[2], s[0][2]) for k, v in s.items()} for n, s in scored.items()}
    assert all(told[n][20] > told[n][1] for n in ("grain__a", "grain__b")) and told["grain__c"][20] < told["grain__c"][1]
    assert fam["chains"] == 3 and fam["told_passed"] == 2
    assert fam["passed"] == sum(all(s[k][0] > s[1][0] for k in (5, 10, 20)) for s in scored.values())
    ones, tens = [t[1] for t in told.values()], [t[10] for t in told.values()]
    pairs = [(a < b) + 0.5 * (a == b) for a in ones for b in tens]
    assert fam["told_auc_step1_vs_step10"] == pytest.approx(sum(pairs) / len(pairs))


def test_the_outside_renders_are_read_where_installed_and_said_absent_where_not(monkeypatch, tmp_path, capsys):
    """hard_images --outside-renders reads the validator's DISTRIBUTION_RENDERS from DISTRIBUTION_ROOT: one that is
    there is scored, one that is not is left out with the package to install named."""
    from PIL import Image

    from bench.detector import hard_images
    from bench.detector import validate_edit_damage as validate

    name, (_, path) = next(iter(validate.DISTRIBUTION_RENDERS.items()))
    (tmp_path / path).parent.mkdir(parents=True)
    Image.fromarray(np.full((96, 128, 3), 90, np.uint8)).save(tmp_path / path)
    monkeypatch.setattr(validate, "DISTRIBUTION_ROOT", tmp_path)
    got = hard_images._outside_renders()
    assert list(got) == [name] and got[name].shape == (96, 128, 3)
    said = capsys.readouterr().out
    absent = {n: p for n, (p, _) in validate.DISTRIBUTION_RENDERS.items() if n != name}
    assert absent and all(f"apt-get install {p}): image {n!r} is left out" in said for n, p in absent.items())


def test_a_signature_draw_decodes_its_outside_renders_once_and_gives_each_signature_its_own_copy(monkeypatch, tmp_path):
    """validate_edit_damage's signature_sources: the renders of a draw's `outside` packages are read from
    DISTRIBUTION_ROOT once a process (a draw's four signatures share them), each call a copy (a chain cannot
    change another signature's source), another root read again."""
    from PIL import Image

    from bench.detector import validate_edit_damage as validate

    name, (_, path) = next(iter(validate.DISTRIBUTION_RENDERS.items()))
    (tmp_path / path).parent.mkdir(parents=True)
    Image.fromarray(np.full((96, 128, 3), 90, np.uint8)).save(tmp_path / path)
    monkeypatch.setattr(validate, "DISTRIBUTION_ROOT", tmp_path)
    decoded = validate._decoded_renders(tmp_path, validate.RENDER_PACKAGES)
    assert list(decoded) == [name] and validate._decoded_renders(tmp_path, validate.RENDER_PACKAGES) is decoded
    monkeypatch.setattr(validate, "signature_sources", validate.signature_sources)
    monkeypatch.setattr(validate, "DISTRIBUTION_PHOTOGRAPHS", {})  # no photograph of the packages: skimage's only
    a = validate.signature_sources("creases", 96, 90, validate.RENDER_PACKAGES)[validate.OUTSIDE_RENDERS]
    b = validate.signature_sources("speckles", 96, 90, validate.RENDER_PACKAGES)[validate.OUTSIDE_RENDERS]
    assert list(a) == [name] and np.array_equal(a[name], decoded[name]) and a[name] is not b[name]
    a[name][:] = 0
    assert decoded[name].max() == 90  # a chain that wrote into its source changed no other's
    other = tmp_path / "other"
    monkeypatch.setattr(validate, "DISTRIBUTION_ROOT", other)  # another root is read again: nothing there
    assert validate.signature_sources("jpeg", 96, 90, validate.RENDER_PACKAGES)[validate.OUTSIDE_RENDERS] == {}
