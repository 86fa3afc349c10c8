"""`banana100` command line: make chains, build and publish datasets, score them, report.

Exit status:
{exit_statuses}

Every error is one line on stderr (`banana100 COMMAND: error: ...`), never a traceback;
an unexpected exception (a bug) keeps its traceback. BANANA100_DEBUG=1 shows the traceback
of user errors too, above the same line, and changes nothing else (not the exit status).
"""

from __future__ import annotations

import argparse
import os
import sys

from banana100 import __version__, extras
from banana100.cli import (
    build_dataset, demo, generate, import_chains, publish_metrics, push, report, score, verify, weights,
)
from banana100.cli.common import (
    EXIT_DATA, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, HelpFormatter, Parser, exit_status, exit_status_table,
    library_log, print_error, print_traceback,
)
from banana100.errors import Banana100Error

# one module per command (`add_parser(sub)`, and `run(args)` as the handler), in --help's order
COMMANDS = (generate, build_dataset, verify, import_chains, push, publish_metrics, score, report, demo, weights)

if __doc__:  # (python -OO drops docstrings)
    __doc__ = __doc__.format(exit_statuses=exit_status_table())


def _version() -> str:

    have = [e for e in extras.EXTRAS if extras.extra_installed(e)]
    lack = [e for e in extras.EXTRAS if e not in have]
    return (f"banana100 {__version__} (extras installed: {', '.join(have) or 'none'}"
            + (f"; not installed: {', '.join(lack)}" if lack else "") + ")")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="banana100", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:  # each module adds its parser and sets its `run` as the handler
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits with status 2 on a bad command line
    name = " ".join(["banana100", args.command] + ([args.weights_command] if args.command == "weights" else []))
    debug = os.environ.get("BANANA100_DEBUG", "") not in ("", "0")
    import warnings

    plain_format = warnings.formatwarning
    if not debug:  # a warning is one line too, like an error (no source line of ours under it)
        warnings.formatwarning = lambda message, category, *_, **__: f"{name}: warning: {message}\n"
    try:
        with library_log(name):  # the library's progress and warnings, one line each on stderr
            status = run_command(args, name, debug)
    finally:  # main() may be called in-process (tests, notebooks): leave warnings as they were
        warnings.formatwarning = plain_format
    return status


def run_command(args, name: str, debug: bool) -> int:
    """args.func(args), with every user error turned into one line and an exit status."""
    try:
        status = args.func(args)
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Banana100Error as e:
        from banana100.errors import BudgetExceeded

        print_traceback(debug)
        print_error(name, e, "stopped" if isinstance(e, BudgetExceeded) else "error")
        return exit_status(e)
    except ModuleNotFoundError as e:

        extra = extras.MODULE_EXTRAS.get((e.name or "").split(".")[0])
        if extra is None:
            raise
        print_traceback(debug)
        print_error(name, f"{e.name} is not installed: {extras.install_hint(extra)}")
        return EXIT_USAGE
    except BrokenPipeError:  # `banana100 weights list | head -1`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit flush does not fail again
        return EXIT_OK
    except OSError as e:  # permission denied, disk full, a path that is a file: the user's to fix
        print_traceback(debug)
        print_error(name, e)
        return EXIT_DATA
    return int(status or 0)
