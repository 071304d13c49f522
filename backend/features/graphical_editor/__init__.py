"""The Graphical Editor feature: workflows as graphs, their versions and runs."""
