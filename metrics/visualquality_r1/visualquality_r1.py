"""VisualQuality-R1 as an evaluate module: `evaluate.load("metrics/visualquality_r1").compute(images=[...])`.

A thin face over the installed `banana100` library (banana100.metrics.vlm.scorer, the weights store,
the metric table); see README.md beside this file for the metric card.
"""

# Import the module, not the base class by name: evaluate.load takes the first metric class
# it finds in this namespace, and that must be the class below.
import banana100.metrics.module as em  # From: "banana100[vlm] @ git+https://github.com/banana100/banana100@v0.1.0"


class VisualqualityR1(em.VLMEvaluator):
    METRIC_NAME = "visualquality_r1"
