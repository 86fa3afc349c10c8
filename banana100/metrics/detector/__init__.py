"""`edit_damage`, this toolkit's detector of recursive-edit damage: the model and its components
(`model`), the same against a reference (`relative`: `edit_damage_rel`), and its card built from
the validation figures in `data/` (`card`). docs/edit-damage.md says what it measures and why."""
