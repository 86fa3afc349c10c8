"""The scoring engine: the scorer contract every backend implements (`contract`: `Scorer`,
`Scores`, `isolating`), the metric table's scorer (`scorer`: one model per metric fed same-size
batches), the one feed of decoded images to scorers (`feed`), the device upload (`upload`: uint8
batches through pinned memory, float conversion on the device) and faster forwards for pyiqa
archs that waste work (`fastpaths`). The children never import this face."""

from banana100.metrics.engine.contract import Scorer, Scores, check_size, failure_error, isolating
from banana100.metrics.engine.scorer import (
    DEFAULT_BATCH_SIZE, MetricScorer, check_device, default_device, keep_freed_memory, to_tensor,
)

__all__ = ["DEFAULT_BATCH_SIZE", "MetricScorer", "Scorer", "Scores", "check_device", "check_size", "default_device",
           "failure_error", "isolating", "keep_freed_memory", "to_tensor"]
