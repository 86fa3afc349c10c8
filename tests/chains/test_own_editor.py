"""Your own editor: `--editor file.py:Class`, `package.module:Class`, an entry point, and one line
for every mistake in a user's module; the editor of docs/own-editor.md run as it is written."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from banana100.chains.editors import ENTRY_POINT_GROUP, known_editors, make_editor
from banana100.chains.manifest import read_manifest
from banana100.chains.runner import generate_chains
from banana100.chains.store import RUN_FILE
from banana100.cli import main as cli_main
from banana100.errors import RunMismatchError, RunStopped, UnknownEditorError

from fixtures.repopaths import REPO

OWN_EDITOR_DOC = REPO / "docs" / "own-editor.md"


def doc_editor_code() -> str:
    text = OWN_EDITOR_DOC.read_text()
    return re.search(r"A minimal editor \(`my_editor.py`\).*?```python\n(.*?)```", text, re.S).group(1)


@pytest.fixture
def my_editor(tmp_path) -> Path:
    path = tmp_path / "editors" / "my_editor.py"
    path.parent.mkdir()
    path.write_text(doc_editor_code())
    return path


def cli(capsys, *args) -> tuple[int, str, str]:
    code = cli_main(list(map(str, args)))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_documented_editor_runs_from_the_doc(my_editor, sources, tmp_path, capsys):
    assert len(doc_editor_code().strip().splitlines()) <= 35  # "about 30 lines"
    out = tmp_path / "run"
    spec = f"{my_editor}:Posterize"
    code, text, err = cli(capsys, "generate", "--editor", spec, "--sources", sources, "--steps", 3, "--out", out,
                          "--dry-run")
    assert code == 0, err
    assert "posterize" in text and not out.exists()
    code, text, err = cli(capsys, "generate", "--editor", spec, "--sources", sources, "--steps", 3, "--out", out)
    assert code == 0, err
    records = read_manifest(out)
    assert len(records) == 2 * 4 and {r["editor"] for r in records} == {"posterize"}
    assert {r["model"] for r in records} == {"posterize-v1"}
    step3 = [r for r in records if r["step"] == 3]
    from banana100.imageio import load_rgb

    img = load_rgb(out / step3[0]["image"])
    assert len(np.unique(img)) <= 4  # 4 levels: the editor's image, as stored
    assert '"levels": 4' in (out / RUN_FILE).read_text()
    # resume: a larger --steps makes only the new steps, the file-less spec too (one class in the file)
    code, text, err = cli(capsys, "generate", "--editor", str(my_editor), "--sources", sources, "--steps", 4,
                          "--out", out)
    assert code == 0, err
    assert "images written this run: 2" in text
    # the fixed option is fixed for the folder, as a built-in editor's
    with pytest.raises(RunMismatchError, match="levels"):
        generate_chains(make_editor(spec, levels=8), sources, "replicate", 5, 1, out, progress=False)


def test_module_path_spec_and_a_plain_class(tmp_path, sources, monkeypatch):
    pkg = tmp_path / "pkgroot" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plain.py").write_text(textwrap.dedent("""
        from banana100.chains.editors import EditResult

        class Copy:
            '''Not an Editor subclass: edit alone is enough.'''
            def edit(self, request):
                return EditResult(image=request.image.copy())
    """))
    monkeypatch.syspath_prepend(str(tmp_path / "pkgroot"))
    ed = make_editor("mypkg.plain:Copy")
    assert (ed.name, ed.model) == ("Copy", "Copy")
    summary = generate_chains(ed, sources, "replicate", 2, 1, tmp_path / "run", progress=False)
    assert summary.written == 2 * 3
    assert {r["editor"] for r in read_manifest(tmp_path / "run")} == {"Copy"}


def test_an_installed_packages_entry_point(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "ep_pkg").mkdir(parents=True)
    (site / "ep_pkg" / "__init__.py").write_text(textwrap.dedent("""
        from banana100.chains.editors import Editor, EditResult

        class Identity(Editor):
            name = "identity"
            model = "identity-1"
            def edit(self, request):
                return EditResult(image=request.image)
    """))
    dist = site / "ep_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nidentity = ep_pkg:Identity\n"
                                           "gemini = ep_pkg:Identity\nbroken = ep_pkg:Missing\n")
    monkeypatch.syspath_prepend(str(site))
    assert "identity" in known_editors()
    assert make_editor("identity").model == "identity-1"
    assert type(make_editor("gemini")).__name__ == "GeminiEditor"  # a built-in name is not taken over
    with pytest.raises(UnknownEditorError, match=r"--editor broken \(entry point 'ep_pkg:Missing'.*AttributeError"):
        make_editor("broken")


BAD_MODULES = {
    "syntax.py": ("def edit(:\n", r"importing .*syntax.py raised SyntaxError \(line 1\)"),
    "raises.py": ("raise RuntimeError('no GPU here')\n", r"importing .*raises.py raised RuntimeError: no GPU here"),
    "exits.py": ("import sys\nsys.exit(3)\n", r"importing .*exits.py raised SystemExit"),
    "noedit.py": ("class NoEdit:\n    name = 'x'\n", r"class NoEdit has no edit\(self, request\) method"),
    "abstract.py": ("from banana100.chains.editors import Editor\nclass Half(Editor):\n    name = 'half'\n",
                    r"class Half has no edit"),
}


@pytest.mark.parametrize("filename", sorted(BAD_MODULES))
def test_a_bad_module_is_one_line_naming_it(filename, tmp_path, sources, capsys):
    code_text, pattern = BAD_MODULES[filename]
    path = tmp_path / filename
    path.write_text(code_text)
    cls = {"noedit.py": ":NoEdit", "abstract.py": ":Half"}.get(filename, ":Anything")
    out = tmp_path / "run"
    code, _, err = cli(capsys, "generate", "--editor", f"{path}{cls}", "--sources", sources, "--out", out)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and re.search(pattern, lines[0]), err
    assert "Traceback" not in err and not out.exists()


def test_missing_class_file_module_and_constructor(tmp_path, sources, my_editor):
    with pytest.raises(UnknownEditorError, match=r"has no class 'Nope' \(classes there: Posterize\)"):
        make_editor(f"{my_editor}:Nope")
    with pytest.raises(UnknownEditorError, match="no such file"):
        make_editor(f"{tmp_path / 'absent.py'}:X")
    with pytest.raises(UnknownEditorError, match="no module named 'no_such_pkg_b4n'"):
        make_editor("no_such_pkg_b4n.editors:X")
    with pytest.raises(UnknownEditorError, match=r"Posterize\(levels=1\) raised ValueError: levels must be 2-256"):
        make_editor(f"{my_editor}:Posterize", levels=1)
    with pytest.raises(UnknownEditorError, match="or your own class as path/to/file.py:Class"):
        make_editor("no-such-editor")


@pytest.mark.parametrize("returned, what", [
    ("request.image", r"returned a bare ndarray \(uint8 \(\d+, \d+, 3\)\) from edit\(\)"),
    ("{'image': request.image}", r"returned dict \{'image'"),
    ("None", r"returned NoneType None from edit\(\)"),
    ("EditResult(image='step.png')", r"returned an EditResult whose image is str 'step.png'"),
])
def test_a_wrong_return_type_stops_the_run_at_the_first_step(returned, what, tmp_path, sources, capsys):
    path = tmp_path / "wrong.py"
    path.write_text(textwrap.dedent(f"""
        from banana100.chains.editors import Editor, EditResult

        class Wrong(Editor):
            name = "wrong"
            model = "wrong-1"
            def edit(self, request):
                return {returned}
    """))
    with pytest.raises(RunStopped, match=f"the editor {re.escape(str(path))}:Wrong {what}"):
        generate_chains(make_editor(f"{path}:Wrong"), sources, "replicate", 3, 2, tmp_path / "run",
                        progress=False, concurrency=1)
    records = read_manifest(tmp_path / "run")
    assert {r["step"] for r in records} == {0}  # stopped at the first step: no chain went on
    code, _, err = cli(capsys, "generate", "--editor", f"{path}:Wrong", "--sources", sources, "--out",
                       tmp_path / "run2", "--steps", 2)
    first = next(line for line in err.splitlines() if "error:" in line)  # under the progress bar
    assert code == 2 and first.startswith("banana100 generate: error: the editor ")


def test_own_editor_fits_the_cli_options(my_editor, sources, tmp_path, capsys):
    code, _, err = cli(capsys, "generate", "--editor", f"{my_editor}:Posterize", "--base-url", "http://x",
                       "--sources", sources, "--out", tmp_path / "run")
    assert code == 2 and "--base-url" in err
    assert sys.modules  # the module stays importable by its path on a second load
    assert make_editor(f"{my_editor}:Posterize").levels == 4


PAID = '''
from banana100.chains.editors import Editor, EditResult


class Paid(Editor):
    name = "paid"
    model = "paid-1"
    metered = True
    price = "per call"

    def estimate_usd(self, config, history_images=0):
        return 0.25, 0.30

    def edit(self, request):
        ticket = request.meter.start(0.30, chain_id=request.chain_id, step=request.step)
        request.meter.end(ticket, 0.25, "ok")
        return EditResult(image=request.image, metadata={"cost_usd": 0.25})
'''


def test_a_paid_own_editor_gets_the_ledger_and_the_cost_cap(tmp_path, sources, capsys):
    from banana100.chains.budget import CALLS_FILE, ledger_totals
    from banana100.errors import BudgetExceeded

    path = tmp_path / "paid.py"
    path.write_text(PAID)
    out = tmp_path / "run"
    code, text, _ = cli(capsys, "generate", "--editor", f"{path}:Paid", "--sources", sources, "--steps", 4, "--out",
                        out, "--max-cost", 1, "--dry-run")
    assert code == 0 and "$0.2500 a step" in text and "--max-cost $1.00 will stop the run after about 4 steps" in text
    with pytest.raises(BudgetExceeded):
        generate_chains(make_editor(f"{path}:Paid"), sources, "replicate", 4, 1, out, progress=False, max_cost=1.0,
                        concurrency=1)
    totals = ledger_totals(out / CALLS_FILE)
    assert totals["spent_usd"] <= 1.0 and totals["calls"] == 3  # the 4th call would pass the cap: not made
