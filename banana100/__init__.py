"""Banana100: recursive image-editing degradation chains and the NR-IQA metrics that miss them.

One library shared by the CLI, the evaluate modules (`metrics/`), the dataset builder
(`dataset_script/`) and the Gradio Space (`space/`).
"""

__version__ = "0.1.0"
