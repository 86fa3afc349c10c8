"""Every error a user can act on, in one hierarchy under `Banana100Error`: the CLI prints any of
them as one line, without a traceback (`BANANA100_DEBUG=1` shows it), and maps the kind to its
exit status (banana100/cli/common.py)."""

from __future__ import annotations


class Banana100Error(Exception):
    """Base class: the message says what is wrong, where, and what to do."""


class ImageReadError(Banana100Error):
    """An image file or object could not be read as an image (missing, unreadable, corrupt, or
    larger than the pixel limit of `banana100.imageio`).

    Raised by a scorer after the other images were scored, it carries `scores` (one per input,
    None for each image that failed) and `errors` ({input index: the error for that image}).
    """


class ManifestError(Banana100Error):
    """A run folder or its manifest.jsonl is missing or malformed."""


class SettingError(Banana100Error):
    """An unknown generation setting, or a malformed settings file."""


class WeightsNotFoundError(Banana100Error):
    """A metric's parameter file or checkpoint is neither local nor downloadable."""


class ImageTooSmallError(Banana100Error):
    """An image is smaller than a metric's minimum input size (its smallest meaningful size)."""


class ScoreUndefinedError(Banana100Error):
    """A metric has no score for this image: a uniform image (every pixel the same colour) for a
    metric whose statistics need some variation, or a NaN / infinite result.

    Raised by a scorer after the other images were scored, with `scores` (None for each image
    whose score is undefined) and `errors` ({input index: the error for that image}), like
    ImageReadError. When both kinds occur in one call, ImageReadError is raised and `errors`
    holds both.
    """


class AnswerParseError(ScoreUndefinedError):
    """A language-model evaluator (VisualQuality-R1) answered without a score that parses: that
    image has no score (never a random one); its generated text is in the message."""


class DatasetError(Banana100Error):
    """A dataset cannot be built or read."""


class DiskWriteError(DatasetError, OSError):
    """A file of a dataset build could not be written (a full disk, a quota, a file size limit):
    the message names it; the shards already finished are kept, so the same command, run again
    once there is room, goes on from them."""


class ScoringStopped(Banana100Error):
    """A scorer that cannot go on (a user's module whose process ended, that did not return in time, or that
    raised a BaseException): `score` stops with one line naming it, and keeps every image scored before."""


class UnknownMetricError(Banana100Error):
    """A metric name that is not in the metric table."""


class UsageError(Banana100Error, ValueError):
    """An option or argument value the command cannot use (the CLI exits with status 2).

    Also a ValueError, so code that validated options with ValueError keeps working."""


class MissingExtraError(Banana100Error, ImportError):
    """A feature needs an optional part of banana100 that is not installed; the message names
    the extra to install (`pip install "banana100[deep]"`, ...)."""


# -- metrics ----------------------------------------------------------------------------


class WeightsChecksumError(WeightsNotFoundError):
    """A weights file was found but its sha256 is not the one in the metric table."""


class ParameterFileError(Banana100Error, ValueError):
    """A parameter file is missing, unreadable or not in the expected format."""


# -- chains: editors and runs -----------------------------------------------------------


class UnknownEditorError(Banana100Error):
    """An editor name that `make_editor` does not know."""


class EditError(Banana100Error):
    """An edit step failed after the editor's own (bounded) retries; rerunning retries it."""


class ChainStopped(EditError):
    """This chain cannot go on (e.g. every retry of a step was blocked for safety).

    The runner records the chain as stopped (`stopped.jsonl` in the run folder) with the
    reason, carries on with the other chains, and does not retry it on a rerun unless asked
    (`--retry-stopped`)."""

    def __init__(self, message: str, details: dict | None = None):
        super().__init__(message)
        self.details = details or {}


class RunStopped(EditError):
    """No chain can go on (bad key, unknown model, cost cap): the runner stops scheduling
    steps, lets the steps in flight finish, and reports this reason."""


class BudgetExceeded(RunStopped):
    """The next call could take the run past its cost cap (--max-cost)."""


class RunMismatchError(UsageError):
    """A rerun into a run folder made with a different editor, model, setting, seed or editor
    option (`--inference-steps`): the options conflict with the folder (the CLI's usage status, 2),
    the folder itself is fine."""


class ChainsFailedError(Banana100Error):
    """Some chains stopped on an error; the others ran to the end. `.failures`, `.summary`."""

    def __init__(self, message: str, failures: dict, summary):
        super().__init__(message)
        self.failures = failures  # chain_id -> (step, exception)
        self.summary = summary


class ImportChainsError(Banana100Error):
    """A pattern or folder that cannot be imported."""


class ImportOptionError(ImportChainsError, UsageError):
    """An `import-chains` option that cannot be used (a malformed --pattern, an unknown
    --chat-mode, an --out inside the folder): the usage status, 2, like any bad option."""


# -- the Space --------------------------------------------------------------------------


class UploadError(Banana100Error):
    """An uploaded file the Space refuses (not an image, too large, too many pixels)."""
