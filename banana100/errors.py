"""Errors a user can act on. The CLI prints these as one message, without a traceback."""


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


class DatasetError(Banana100Error):
    """A dataset cannot be built or read."""


class UnknownMetricError(Banana100Error):
    """A metric name that is not in the metric table."""


class UsageError(Banana100Error, ValueError):
    """An option or argument value the command cannot use (the CLI exits with status 2).

    Also a ValueError, so code that validated options with ValueError keeps working."""


class MissingExtraError(Banana100Error, ImportError):
    """A feature needs an optional part of banana100 that is not installed; the message names
    the extra to install (`pip install "banana100[deep]"`, ...)."""
