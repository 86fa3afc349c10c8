"""Widget of the Banana100 sensitivity evaluate module (this folder as a Hugging Face Space).

Paste one metric's scores (chain id, step, score per row), say which direction is better, and
get the protocol's verdict: overall and per chain. evaluate's own `launch_gradio_widget` is not
used: it calls `gr.inputs`, which Gradio 4 removed.
"""

from pathlib import Path

import evaluate
import gradio as gr
import pandas as pd

HERE = Path(__file__).resolve().parent
protocol = evaluate.load(str(HERE))

EXAMPLE = pd.DataFrame({
    "chain_id": ["a"] * 4 + ["b"] * 4,
    "step": [1, 5, 10, 20] * 2,
    "score": [41.0, 39.5, 37.0, 30.2, 41.0, 42.5, 40.0, 44.1],
})


def judge(table: pd.DataFrame, lower_better: bool):
    table = table.replace("", None).dropna(how="all")
    if table.empty:
        raise gr.Error("enter at least one row: chain_id, step, score")
    try:
        out = protocol.compute(scores=[float(v) for v in table["score"]], steps=[int(v) for v in table["step"]],
                               chain_ids=[str(v) for v in table["chain_id"]], lower_better=bool(lower_better))
    except (TypeError, ValueError) as e:
        raise gr.Error(str(e)) from None
    per_chain = pd.DataFrame(out.pop("per_chain"))
    return out, per_chain


with gr.Blocks(title="Banana100 sensitivity") as demo:
    gr.Markdown("# Banana100 sensitivity\nA chain passes only when the score at steps 5, 10 and 20 is worse "
                "than at step 1. See the card below.")
    table = gr.Dataframe(value=EXAMPLE, headers=["chain_id", "step", "score"], datatype=["str", "number", "number"],
                         label="one metric's scores")
    lower = gr.Checkbox(label="lower score = better quality (NIQE, BRISQUE, PIQE, IL-NIQE, PI)")
    button = gr.Button("Judge")
    overall = gr.JSON(label="overall")
    chains = gr.Dataframe(label="per chain")
    button.click(judge, [table, lower], [overall, chains])
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    gr.Markdown(readme.split("\n---\n", 1)[-1] if readme.startswith("---") else readme)

if __name__ == "__main__":
    demo.launch()
