"""`advsim bench …` commands, one module per benchmark, each exposing ``run(**options) -> dict``."""
