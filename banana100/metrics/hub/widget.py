"""The widget of an image metric's evaluate module, when its folder is pushed as a Hub Space.

Every metric folder's `app.py` is two lines over this (written by `python -m banana100.metrics.hub.publish
--sync`), so the 21 Spaces share one widget. evaluate's own `launch_gradio_widget` is not used:
it calls `gr.inputs`, which Gradio 4 removed.
"""

from __future__ import annotations

from pathlib import Path


def build(folder: str | Path):
    """(Gradio Blocks, score function) for the evaluate module in `folder` (module + card).

    The module is loaded exactly as `evaluate.load(folder)` loads it, so the widget's scores are
    the module's own; `score(files)` -> (rows of [file name, score], one-line summary).
    """
    import evaluate
    import gradio as gr

    folder = Path(folder).resolve()
    metric = evaluate.load(str(folder))
    from banana100.metrics.table import get_metric

    spec = get_metric(metric.METRIC_NAME)

    def score(files):
        if not files:
            raise gr.Error("upload one or more images")
        paths = [getattr(f, "name", f) for f in files]
        try:
            out = metric.compute(images=paths)
        except Exception as e:  # a user-facing message (unreadable image, missing weights, ...)
            raise gr.Error(str(e)) from None
        rows = [[Path(p).name, s] for p, s in zip(paths, out["scores"], strict=True)]
        better = "lower" if out["lower_better"] else "higher"
        return rows, f"{out['metric']}: mean {out['mean']:.4f} ({better} is better)"

    with gr.Blocks(title=f"{spec.display_name} ({spec.name})") as demo:
        gr.Markdown(f"# {spec.display_name}\n{spec.display_name} no-reference image quality ({spec.direction}); "
                    "the scores are those of `evaluate.load(...).compute(images=...)`. See the card below.")
        files = gr.File(file_count="multiple", file_types=["image"], label="images")
        button = gr.Button("Score")
        table = gr.Dataframe(headers=["image", "score"], label="scores")
        summary = gr.Textbox(label="summary")
        button.click(score, files, [table, summary])
        readme = (folder / "README.md").read_text(encoding="utf-8")
        gr.Markdown(readme.split("\n---\n", 1)[-1] if readme.startswith("---") else readme)
    return demo, score
