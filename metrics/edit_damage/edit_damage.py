"""Edit damage as an evaluate module: `evaluate.load("metrics/edit_damage").compute(images=[...])`.

A thin face over the installed `banana100` library (scoring engine, metric table, the detector in
`banana100.metrics.detector.model`); see README.md beside this file for the metric card.
`compute(images=..., components=True)` also returns the score's components per image.
"""

# Import the module, not the base class by name: evaluate.load takes the first metric class
# it finds in this namespace, and that must be the class below.
import banana100.metrics.module as em  # From: "banana100 @ git+https://github.com/banana100/banana100@v0.1.0"


class EditDamage(em.IQAMetric):
    METRIC_NAME = "edit_damage"
