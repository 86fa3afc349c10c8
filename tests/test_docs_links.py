"""The documents' links resolve in a clone: every relative markdown link of README.md, docs/*.md,
bench/README.md and BENCHMARKS.md names a file that exists, and its `#anchor` a heading of that
file (GitHub's slug). BENCHMARKS.md stays a short page of figures of record: under 40 KB, no
heading naming an issue, a round or a commit, and every `bench/...` path and `python -m bench...`
module it names exists."""

import re
from pathlib import Path

import pytest

from fixtures.repopaths import REPO

DOCS = [REPO / "README.md", REPO / "BENCHMARKS.md", REPO / "bench" / "README.md",
        *sorted((REPO / "docs").glob("*.md"))]
BENCHMARKS = REPO / "BENCHMARKS.md"


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where `](` is not a link."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading's text: its rendered text lower-cased, punctuation dropped,
    spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in `path`, repeated headings numbered as GitHub does (-1, -2, ...)."""
    text = re.sub(r"^(```|~~~).*?^\1", "", path.read_text(), flags=re.S | re.M)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def broken_links(doc: Path) -> list[str]:
    """The relative links of `doc` that name no file, or an anchor its target lacks."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", _prose(doc.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        where = (doc.parent / path).resolve() if path else doc
        shown = where.relative_to(REPO) if where.is_relative_to(REPO) else where
        if not where.exists():
            broken.append(f"{target}: no file {shown}")
        elif anchor and (where.suffix != ".md" or anchor not in anchors(where)):
            broken.append(f"{target}: no heading with anchor #{anchor} in {shown}")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(doc):
    assert not broken_links(doc), f"{doc.relative_to(REPO)}: " + "; ".join(broken_links(doc))


def test_the_check_catches_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "b.md").write_text("# B\n\n## Same chat (`--chat same`)\n\n## Twice\n\n## Twice\n")
    doc = tmp_path / "a.md"
    doc.write_text("[ok](b.md#same-chat---chat-same) [ok](b.md#twice-1) [web](https://x.org/y#z) "
                   "`[code](gone.md)` [bad](gone.md) [bad](b.md#twice-2) [bad](#nothing)\n# A\n")
    assert [b.split(":")[0] for b in broken_links(doc)] == ["gone.md", "b.md#twice-2", "#nothing"]


def test_benchmarks_is_short_and_its_headings_name_no_issue_round_or_commit():
    assert BENCHMARKS.stat().st_size < 40_000, f"BENCHMARKS.md is {BENCHMARKS.stat().st_size} bytes"
    headings = re.findall(r"^#+ +(.+)$", _prose(BENCHMARKS.read_text()), re.M)
    bad = [h for h in headings if re.search(r"issue|round|\b[0-9a-f]{7}\b", h, re.I)]
    assert not bad, f"BENCHMARKS.md headings naming an issue, a round or a commit: {bad}"


def test_benchmarks_names_only_scripts_and_results_that_exist():
    text = BENCHMARKS.read_text()
    # `git show COMMIT:bench/...` names a file as of a commit: not one of the tree's
    paths = {p.rstrip(".,;:") for p in re.findall(r"(?<![\w:/.^-])bench/[\w./<>-]+", text)}
    paths = {p for p in paths if "<" not in p}
    missing = sorted(p for p in paths if not (REPO / p).exists())
    modules = set(re.findall(r"python -m (bench(?:\.\w+)+)", text))
    missing += sorted(m for m in modules if not (REPO / (m.replace(".", "/") + ".py")).is_file())
    assert paths and modules
    assert not missing, f"BENCHMARKS.md names what the repository lacks: {missing}"
