"""Verdicts on trajectories: strict form checker, render gate, LM and oracle judges."""
