"""The main job end to end, as a user runs it: real subprocesses, tiny settings."""

import os
import re
import subprocess
import sys

import pytest
from PIL import Image

from fixtures.repopaths import PARAMS as IQA_PARAMS, REPO


def run_cli(*args, env_extra=None, cwd=None):
    env = {**os.environ, "BANANA100_WEIGHTS": str(IQA_PARAMS), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "banana100", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or REPO, timeout=600)


@pytest.mark.integration  # the whole demo in a subprocess (~35 s)
def test_demo_end_to_end(tmp_path, iqa_params):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", str(out), "--steps", "20", "--chains", "2")
    assert proc.returncode == 0, proc.stderr
    report = out / "report" / "report.md"
    assert f"report: {report.resolve()}" in proc.stdout
    text = report.read_text()
    for metric in ("piqe", "niqe", "brisque"):
        assert f"| {metric} | lower better | 2 |" in text
    assert (out / "report" / "sensitivity.png").stat().st_size > 10_000
    assert (out / "report" / "chain.png").is_file()

    import datasets

    ds = datasets.load_dataset(str(out / "dataset"), split="train")
    assert ds.num_rows == 2 * 21
    card = (out / "dataset" / "README.md").read_text()  # the sample images' own licences, not Banana100's
    assert "| `coffee` | CC0 (Rachel Michetti) |" in card and "| `rocket` | public domain (SpaceX) |" in card
    assert "licence of these images is not known" not in card and "inherited from" not in card

    # Rerunning resumes: nothing is regenerated or rescored, the report is the same.
    again = run_cli("demo", "--out", str(out), "--steps", "20", "--chains", "2")
    assert again.returncode == 0, again.stderr
    assert report.read_text() == text


@pytest.mark.integration  # a demo run in a CLI process (~7 s)
def test_demo_without_parameter_files_uses_piqe_and_says_why(tmp_path):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", str(out), "--steps", "20", "--chains", "1",
                   env_extra={"BANANA100_WEIGHTS": str(tmp_path / "none"), "TORCH_HOME": str(tmp_path / "torch"),
                              "HF_HOME": str(tmp_path / "hf")})
    assert proc.returncode == 0, proc.stderr
    first = proc.stderr.splitlines()[0]  # the first line names what is skipped and how to add it
    assert "skipping niqe, brisque: " in first and "niqe: niqe_modelparameters.mat" in first
    assert "`banana100 weights download niqe brisque`" in first
    text = (out / "report" / "report.md").read_text()
    # with no file at all, PIQE and the detector side by side: alone and against step 0
    assert "| piqe |" in text and "| edit_damage | lower better | 1 | 1 |" in text
    assert "| edit_damage_rel | lower better | 1 | 1 |" in text
    assert "**Side by side**: PIQE saw the damage in" in text


def test_demo_with_a_missing_metric_stops_before_generating(tmp_path):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", str(out), "--metrics", "piqe,niqe",
                   env_extra={"BANANA100_WEIGHTS": str(tmp_path / "none"), "TORCH_HOME": str(tmp_path / "torch"),
                              "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]  # one line
    assert "missing files: niqe: niqe_modelparameters.mat" in proc.stderr and "ready: piqe" in proc.stderr
    assert not out.exists()  # nothing generated, built or scored


ERROR_CASES = [
        # 1: a data problem (what the command was pointed at is missing or wrong)
        (["score", "no/such/folder", "--out", "x.parquet"], 1, "no/such/folder: no such file or folder"),
        (["report", "absent.parquet", "--out", "r"], 1, "absent.parquet: no such scores file"),
        (["generate", "--sources", "no/such/dir", "--steps", "2", "--out", "r"], 1, "no/such/dir"),
        # 2: usage (a bad option or argument)
        (["score", ".", "--metrics", "nosuchmetric", "--out", "x.parquet"], 2, "unknown metric 'nosuchmetric'"),
        (["score", ".", "--metrics", "topiq_nr", "--backend", "native", "--out", "x.parquet"], 2,
         "topiq_nr has no native backend"),
        (["score", ".", "--batch-size", "0", "--out", "x.parquet"], 2, "argument --batch-size: must be >= 1, got 0"),
        (["generate", "--sources", ".", "--out", "r", "--max-cost", "-1"], 2, "argument --max-cost: must be >= 0"),
        (["generate", "--sources", ".", "--out", "r", "--model", "x"], 2, "--model applies to the service editors"),
        (["generate", "--sources", ".", "--out", "r", "--setting", "nosuch"], 2, "nosuch"),
        (["demo", "--chains", "99"], 2, "argument --chains: must be at most 7"),
        (["push", ".", "--repo-id", "no-slash", "--dry-run"], 2, "expected ORG/NAME"),
        (["publish-metrics", "--org", "a/b", "--dry-run"], 2, "no slash"),
        (["weights", "download"], 2, "name the metrics"),
        (["nosuchcommand"], 2, "invalid choice: 'nosuchcommand'"),
]


# a CLI process each (~2 s): the first four (a data error per command, a usage error) in the fast tier,
# the rest in the integration tier (CI runs both)
@pytest.mark.parametrize("args, status, message", [
    case if i < 4 else pytest.param(*case, marks=pytest.mark.integration) for i, case in enumerate(ERROR_CASES)])
def test_cli_errors_are_one_clear_line(tmp_path, args, status, message):
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == status, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _actions(parser):
    """(command, action) for every option and argument of every (sub)command."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from ((f"{name} {c}".strip(), a) for c, a in _actions(child))
        else:
            yield "", action


def test_every_option_has_help_and_shows_its_default():
    import argparse

    from banana100.cli import HelpFormatter, build_parser

    parser = build_parser()
    checked = 0
    for command, action in _actions(parser):
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        where = f"banana100 {command} {action.option_strings or action.dest}"
        assert action.help, f"{where} has no help"
        text = HelpFormatter("x")._get_help_string(action)
        if action.required or (not action.option_strings and action.nargs not in ("?", "*")):
            continue  # required: no default to show
        if isinstance(action, argparse._StoreTrueAction):
            assert "(default: off)" in text, where
        else:
            assert "default" in text.lower(), f"{where}: help shows no default: {text!r}"
        checked += 1
    assert checked > 40
    # and as a user sees it
    help_text = " ".join(run_cli("score", "--help").stdout.split())  # argparse wraps lines
    assert "(default: each metric's own: 8" in help_text and "(default: piqe,niqe,brisque)" in help_text


def test_version_and_documented_exit_statuses():
    from banana100 import __version__, cli

    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith(f"banana100 {__version__} (extras installed:")
    for status, word in ((1, "data problem"), (2, "usage"), (3, "budget"), (130, "interrupted")):
        assert f"{status:<4} {word}" in cli.__doc__
    assert run_cli("--help").stdout.count("Exit status:") == 1
    # docs/cli.md's table: the same statuses as banana100/cli/common.py, each with its meaning
    from banana100.cli.common import EXIT_STATUSES

    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", (REPO / "docs" / "cli.md").read_text(), re.M))
    assert sorted(map(int, rows)) == sorted(EXIT_STATUSES)
    for status, meaning in EXIT_STATUSES.items():
        assert meaning.split(":")[0].split(" (")[0] in rows[str(status)], status


def test_missing_extra_names_the_extra(tmp_path, monkeypatch, capsys):
    """A deep metric without pyiqa, the gemini editor without google-genai: exit 2 and the pip line."""
    from banana100 import extras
    from banana100.cli import main
    from banana100.metrics.engine.scorer import MetricScorer
    from banana100.errors import MissingExtraError

    real = extras.extra_installed
    monkeypatch.setattr(extras, "extra_installed", lambda extra: extra not in ("deep", "gemini") and real(extra))
    with pytest.raises(MissingExtraError, match=r"topiq_nr metric \(pyiqa backend\) needs the 'deep' extra") as e:
        MetricScorer("topiq_nr", device="cpu")
    assert extras.requirement(("deep",)) in str(e.value) and isinstance(e.value, ImportError)
    (tmp_path / "src").mkdir()
    Image.new("RGB", (64, 64), "red").save(tmp_path / "src" / "a.png")
    assert main(["generate", "--editor", "gemini", "--sources", str(tmp_path / "src"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "the gemini editor needs the 'gemini' extra" in err and "banana100[gemini] @ git+" in err
    # from Python too, before any key or network is looked at
    from banana100.chains.editors import make_editor

    with pytest.raises(MissingExtraError, match="the gemini editor needs the 'gemini' extra"):
        make_editor("gemini").connect()


def test_module_not_found_deeper_down_is_mapped_to_its_extra(monkeypatch, capsys):
    from banana100 import cli

    def boom(args):
        raise ModuleNotFoundError("No module named 'google'", name="google")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["report"].set_defaults(func=boom)
    assert cli.main(["report", "x.parquet", "--out", "r"]) == 2
    assert "google is not installed: pip install 'banana100[gemini] @ git+" in capsys.readouterr().err


def test_cli_warnings_are_one_line_and_left_as_they_were(tmp_path, monkeypatch):
    """A warning during a command prints as one line; main() leaves the warnings module as it was."""
    import warnings

    import banana100.cli as cli

    before = warnings.formatwarning
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.jsonl").write_text("")
    seen = []
    real = cli.run_command

    def format_then_run(args, name, debug):
        seen.append(warnings.formatwarning("something to say", UserWarning, "x.py", 1))
        return real(args, name, debug)

    monkeypatch.setattr(cli, "run_command", format_then_run)
    cli.main(["verify", str(tmp_path / "run")])
    assert seen == ["banana100 verify: warning: something to say\n"]
    assert warnings.formatwarning is before


def test_library_log_lines_reach_stderr_with_the_command_and_logging_is_left_as_it_was(monkeypatch, capsys):
    """The library logs (INFO progress, WARNING skipped things); the CLI shows each record as one
    line on stderr after the command's name; stdout keeps only the command's own output."""
    import logging

    from banana100 import cli

    def talk(args):
        logging.getLogger("banana100.scoring").info("process 0/2 scores every 2th image from #0")
        logging.getLogger("banana100.scoring").warning("skipping niqe: not found")
        logging.getLogger("banana100.chains.runner").warning("\ninterrupted: finishing the steps in flight")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["report"].set_defaults(func=talk)
    logger = logging.getLogger("banana100")
    before = (logger.level, logger.propagate, list(logger.handlers))
    assert cli.main(["report", "x.parquet", "--out", "r"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("banana100 report: process 0/2 scores every 2th image from #0\n"
                   "banana100 report: warning: skipping niqe: not found\n"
                   "\nbanana100 report: warning: interrupted: finishing the steps in flight\n")
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


def test_only_the_cli_prints():
    """Library code logs (logging.getLogger(__name__)); print() is for the cli package, the test
    helpers and the `main()` of a `python -m` tool (banana100.metrics.hub.cards, .publish)."""
    import ast

    offenders = []
    for path in sorted((REPO / "banana100").rglob("*.py")):
        rel = path.relative_to(REPO / "banana100").as_posix()
        if rel.startswith(("cli/", "testing/")):
            continue
        tree = ast.parse(path.read_text())
        mains = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "main"]
        allowed = {id(c) for m in mains for c in ast.walk(m)}
        offenders += [f"{rel}:{n.lineno}" for n in ast.walk(tree)
                      if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print" and id(n) not in allowed]
    assert not offenders, offenders
