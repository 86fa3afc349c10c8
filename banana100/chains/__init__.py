"""Degradation chains: editors (`editors`), generation settings and prices (`settings`,
`pricing`), the spending guard (`budget`), run folders and their manifest (`manifest`), the
runner that makes chains, and the importer for chains made elsewhere (`importer`)."""
