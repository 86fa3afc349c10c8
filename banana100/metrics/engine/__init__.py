"""The scoring engine: one model per metric fed same-size batches (`scorer`), the device feed
(`upload`: uint8 batches through pinned memory, float conversion on the device) and faster
forwards for pyiqa archs that waste work (`fastpaths`). The children never import this face."""

from banana100.metrics.engine.scorer import (
    DEFAULT_BATCH_SIZE, MetricScorer, check_device, check_size, default_device, image_failures, keep_freed_memory,
    to_tensor,
)

__all__ = ["DEFAULT_BATCH_SIZE", "MetricScorer", "check_device", "check_size", "default_device", "image_failures",
           "keep_freed_memory", "to_tensor"]
