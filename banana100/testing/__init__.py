"""What the tests and the bench scripts share: deterministic images made offline (no ../shared,
no downloads). Part of the library so that neither tests/ nor bench/ imports the other."""
