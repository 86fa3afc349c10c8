"""What every `banana100` command shares: the exit statuses (their one home), the help
formatter and one-line parser errors, the option types, how an error becomes one line on
stderr and an exit status, and how the library's log lines reach the user.

Output: what a command produces (tables, paths written, summaries, the dry-run plan) is
returned by the library and printed on stdout by the command; what the library logs on the
`banana100` logger (progress at INFO, skipped things and other warnings at WARNING) is shown
on stderr, one line per record, prefixed with the command (`banana100 score: ...`,
`banana100 score: warning: ...`), like errors and Python warnings.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys

from banana100.errors import Banana100Error, MissingExtraError, UsageError

# The exit statuses: `banana100 --help` (the package docstring), docs/cli.md (checked by
# tests/cli/test_demo_cli.py) and every command take them from here.
EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_STATUSES = {
    EXIT_OK: "success",
    EXIT_DATA: "data problem: a file, folder, image, manifest, dataset or parameter file is missing or "
               "wrong (also `verify` and `weights check` finding problems), or some chains of `generate` "
               "failed (the others ran; rerun to retry them)",
    EXIT_USAGE: "usage: a bad option or argument, an unknown metric, setting or editor, a rerun into a run "
                "folder with another editor, model, setting or seed, an API key, access or model the "
                "editor's service refuses, or a feature whose optional extra is not installed (the "
                "message names the extra)",
    EXIT_BUDGET: "budget: `generate --max-cost` reached; rerun with a higher cap to go on",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); rerun the same command to resume",
}


def exit_status_table(width: int = 92) -> str:
    """The exit statuses as the `--help` text shows them: `  2    usage: ...`, wrapped."""
    import textwrap

    return "\n".join(textwrap.fill(meaning, width, initial_indent=f"  {status:<4} ", subsequent_indent=" " * 7)
                     for status, meaning in EXIT_STATUSES.items())


def exit_status(e: Banana100Error) -> int:
    """The exit status of a user error, by its kind."""
    from banana100.errors import BudgetExceeded, RunStopped, SettingError, UnknownEditorError, UnknownMetricError

    if isinstance(e, BudgetExceeded):
        return EXIT_BUDGET
    # RunStopped: the service refused the key, the access or the model for every chain
    if isinstance(e, (UsageError, MissingExtraError, UnknownMetricError, UnknownEditorError, SettingError,
                      RunStopped)):
        return EXIT_USAGE
    return EXIT_DATA


def print_error(name: str, message: object, kind: str = "error") -> None:
    """A user error as the CLI shows it: one line on stderr, `banana100 COMMAND: error: ...`."""
    print(f"{name}: {kind}: {message}", file=sys.stderr)


def print_traceback(debug: bool) -> None:
    """BANANA100_DEBUG=1: the traceback of the error being handled, above its one line; the
    exit status stays the same."""
    if debug:
        import traceback

        traceback.print_exc(file=sys.stderr)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows every option's default (a None default is explained in the option's own help)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is argparse.SUPPRESS or "default" in text.lower():
            return text
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return text + (" (default: off)" if action.default is False else " (default: on)")
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            default = ",".join(map(str, action.default)) if isinstance(action.default, list) else action.default
            return f"{text} (default: {default})"
        return text


class Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (and the pointer to --help) instead of the usage block."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def number(kind, low, inclusive=True, high=None):
    """An argparse type: a `kind` (int or float) >= low (or > low), and <= high when given."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"must be {'>=' if inclusive else '>'} {low}, got {text}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


POSITIVE_INT, COUNT, POSITIVE, NON_NEGATIVE = number(int, 1), number(int, 0), number(float, 0, False), number(float, 0)


class LogLines(logging.Handler):
    """The library's log records as the CLI shows them: on stderr (looked up at each record, so
    that a redirected or captured stderr gets them), prefixed with the command; a WARNING or
    worse also says its level, as errors and Python warnings do."""

    def __init__(self, name: str):
        super().__init__(logging.INFO)
        self.command = name

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            text = message.lstrip("\n")
            kind = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
            stream = sys.stderr
            stream.write(f"{message[:len(message) - len(text)]}{self.command}: {kind}{text}\n")
            stream.flush()
        except Exception:  # a closed stream and the like: logging's own report, never a crash
            self.handleError(record)


@contextlib.contextmanager
def library_log(name: str):
    """While a command runs: the `banana100` logger's INFO and up on stderr (LogLines), not passed
    on to the root logger (no second copy where an application configured one); as it was after."""
    logger = logging.getLogger("banana100")
    handler = LogLines(name)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:  # main() may be called in-process (tests, notebooks): leave logging as it was
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def command(sub, name: str, help: str, **kw) -> argparse.ArgumentParser:
    """A subcommand's parser on the main parser's subparsers, with its help as its description."""
    return sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter, **kw)


def check_steps(text: str) -> tuple[int, ...]:
    """'2,5,10' -> (2, 5, 10): the protocol's check steps."""
    try:
        steps = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated step numbers, got {text!r}") from None
    if not steps or min(steps) < 1:
        raise argparse.ArgumentTypeError(f"expected step numbers of at least 1, got {text!r}")
    return steps
