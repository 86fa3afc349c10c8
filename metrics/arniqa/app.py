"""Widget of the ARNIQA evaluate module (this folder as a Hugging Face Space).

Upload images, get the scores of the module beside this file (loaded as `evaluate.load` does).
Written by `python -m banana100.metrics.hub.publish --sync`; the widget is `banana100.metrics.hub.widget`.
"""

from pathlib import Path

from banana100.metrics.hub import widget as metric_widget

demo, score = metric_widget.build(Path(__file__).resolve().parent)

if __name__ == "__main__":
    demo.launch()
