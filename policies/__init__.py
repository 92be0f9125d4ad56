"""Backbone, role adapters, prompts/parsers, engines, numerics contract, GRPO update."""
