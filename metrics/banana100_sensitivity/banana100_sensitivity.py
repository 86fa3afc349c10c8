"""Banana100 sensitivity protocol as an `evaluate` module: a thin face over banana100.protocol."""

# The one line that imports banana100: evaluate reads its `# From:` comment as the install hint
# (written by `python -m banana100.metrics.hub.publish --sync` from banana100/about.py). The base
# class is reached through `em`, so the class below is the one evaluate.load takes.
import banana100.metrics.module as em  # From: "banana100 @ git+https://github.com/banana100/banana100@v0.1.0"


class Banana100Sensitivity(em.SensitivityProtocol):
    pass
