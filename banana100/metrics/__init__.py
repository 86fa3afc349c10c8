"""The metrics. The front desk: the metric table (`table`), parameter files and checkpoints
(`weights`), the metrics a command runs unasked (`athand`), metric names to scorers (`resolve`)
and the arithmetic precision (`precision`). The rooms: `engine/` (the scorer contract, the
metric scorer, the device feed), `native/` (the hand-crafted metrics as batched torch code),
`detector/` (edit_damage), `vlm/` (VisualQuality-R1) and `hub/` (evaluate modules, cards,
Spaces). The paper's protocol judges metrics and is not one: `banana100.protocol`."""
