"""Degradation chains: editors (`editors`), generation settings and prices (`settings`,
`pricing`), the spending guard (`budget`), run folders and their manifest (`manifest`), the
runner that makes chains (`runner`, from `plan`: what remains to make, `step`: one edit, the
same for the runner and the Space's live chain, and `store`: the run folder's writes), and the
importer for chains made elsewhere (`importer`)."""
