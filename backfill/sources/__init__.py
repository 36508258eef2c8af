"""Sources: each knows its input layout and completeness rules (DESIGN.md, "Sources: one seam")."""
