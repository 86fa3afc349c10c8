"""The Hub faces of the metrics: the evaluate modules' base classes (`module`), the metric cards
(`cards`, `card_native`), the metric folders as Spaces (`publish`) and their Gradio widget
(`widget`). The folders `metrics/<id>/` import `banana100.metrics.module`, a shim over `module`."""
