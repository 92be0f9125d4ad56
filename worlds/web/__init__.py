"""The web world: accessibility-tree pages, simulated and real-browser worlds."""
