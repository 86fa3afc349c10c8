"""Errors a user can act on. The CLI prints these as one message, without a traceback."""


class Banana100Error(Exception):
    """Base class: the message says what is wrong, where, and what to do."""


class ImageReadError(Banana100Error):
    """An image file or object could not be read as an image."""


class ManifestError(Banana100Error):
    """A run folder or its manifest.jsonl is missing or malformed."""


class SettingError(Banana100Error):
    """An unknown generation setting, or a malformed settings file."""


class WeightsNotFoundError(Banana100Error):
    """A metric's parameter file or checkpoint is neither local nor downloadable."""


class ImageTooSmallError(Banana100Error):
    """An image is smaller than a metric's minimum input size."""


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
