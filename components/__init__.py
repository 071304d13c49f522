"""Reusable UI pieces."""
