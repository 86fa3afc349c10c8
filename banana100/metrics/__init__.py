"""The metrics: the metric table (`table`), parameter files and checkpoints (`weights`), the
batched scoring engine (`engine`), the evaluate modules' base class (`module`), the metric cards
(`cards`), the native hand-crafted metrics (`native`) and the sensitivity protocol (`protocol`)."""
