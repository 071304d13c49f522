"""Workflows, their versions and graphs."""
