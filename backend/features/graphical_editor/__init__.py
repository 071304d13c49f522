"""The Graphical Editor feature: workflows as graphs, their versions and runs."""

from backend.features.graphical_editor.api import router as ROUTER  # noqa: N812

FEATURE_CODE = "graphicalEditor"
LABEL = "Graphical Editor"
ICON = "workflow"

__all__ = ["FEATURE_CODE", "ICON", "LABEL", "ROUTER"]
