"""Evaluation: entity-level P/R/F, significance tests."""
