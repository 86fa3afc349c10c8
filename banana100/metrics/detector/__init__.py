"""`edit_damage`, this toolkit's detector of recursive-edit damage: the model and its components, with the
metric's names (`model`), the same against a reference (`relative`: `edit_damage_rel`), what its validation
measured (`evidence`, reading `data/`) and its card built from that (`card`). docs/edit-damage.md says what it
measures and why."""

