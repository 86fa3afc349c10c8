"""Widget of the NIMA evaluate module (this folder as a Hugging Face Space).

Loads the module beside this file exactly as `evaluate.load` does and scores uploaded images.
Written by `python -m banana100.publish --sync`; edit banana100/publish.py, not this file.
"""

from pathlib import Path

import evaluate
import gradio as gr

HERE = Path(__file__).resolve().parent
metric = evaluate.load(str(HERE))


def score(files):
    if not files:
        raise gr.Error("upload one or more images")
    paths = [getattr(f, "name", f) for f in files]
    try:
        out = metric.compute(images=paths)
    except Exception as e:  # a user-facing message (unreadable image, missing weights, ...)
        raise gr.Error(str(e)) from None
    rows = [[Path(p).name, s] for p, s in zip(paths, out["scores"])]
    return rows, f"{out['metric']}: mean {out['mean']:.4f} ({'lower' if out['lower_better'] else 'higher'} is better)"


with gr.Blocks(title="NIMA (nima)") as demo:
    gr.Markdown("# NIMA\nNIMA no-reference image quality (higher is better); "
                "the scores are those of `evaluate.load(...).compute(images=...)`. See the card below.")
    files = gr.File(file_count="multiple", file_types=["image"], label="images")
    button = gr.Button("Score")
    table = gr.Dataframe(headers=["image", "score"], label="scores")
    summary = gr.Textbox(label="summary")
    button.click(score, files, [table, summary])
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    gr.Markdown(readme.split("\n---\n", 1)[-1] if readme.startswith("---") else readme)

if __name__ == "__main__":
    demo.launch()
