"""Gymnasium environments (one module per environment)."""
