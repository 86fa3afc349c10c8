"""Where the evaluate module folders (`metrics/<id>/<id>.py`, also published as Hub Spaces) find
their base classes: they import this path, so it stays. The classes live in `hub/module.py`."""

from banana100.metrics.hub.module import IQAMetric, SensitivityProtocol, VLMEvaluator

__all__ = ["IQAMetric", "SensitivityProtocol", "VLMEvaluator"]
