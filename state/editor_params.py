"""The editor's parameter panel beyond plain fields: what a selected node's panel shows about its
type (e.g. a webhook's address and calls) and the handlers of those extras.

Mixed into EditorState (state/editor.py), which calls `_node_extras(node)` whenever the selected
node's form is derived.
"""

from __future__ import annotations

from typing import Any

import reflex as rx


class EditorParamsMixin(rx.State, mixin=True):
    """Extras of the parameter panel for the selected node."""

    def _node_extras(self, node: dict[str, Any] | None) -> None:
        """Derive what the panel shows beyond the fields for `node` (None: nothing selected)."""
