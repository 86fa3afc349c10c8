"""`edit_damage`, this toolkit's detector of recursive-edit damage: the model and its components, with the
metric's names (`model`), the same against a reference (`relative`: `edit_damage_rel`), what its validation
measured (`evidence`, reading `data/`) and its card built from that (`card`). docs/edit-damage.md says what it
measures and why."""

# the detector's names, one home (torch-free, so that any module may import them)
NAME = "edit_damage"  # the bare score (banana100/metrics/table.py)
REL_NAME = "edit_damage_rel"  # the same against a reference: the table's `companion` of NAME
