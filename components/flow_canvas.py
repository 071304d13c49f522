"""The workflow canvas: a Reflex wrapper of components/flow_canvas.jsx (@xyflow/react).

The state owns the graph and passes React Flow nodes/edges (see state/editor.py); the canvas
reports settled changes as small diffs through its event triggers. Fit view keeps the nodes
clear of the minimap (which can be hidden) and the controls.
"""

from __future__ import annotations

from typing import Any

import reflex as rx
from reflex_base.event import no_args_event_spec, passthrough_event_spec

XYFLOW = "@xyflow/react@12.12.1"

_SOURCE = rx.asset("flow_canvas.jsx", shared=True)
rx.asset("flow_canvas.css", shared=True)  # imported by the .jsx; linked next to it


class FlowCanvas(rx.NoSSRComponent):
    """React Flow with PowerOn's node type, palette drop target, minimap and controls."""

    library = _SOURCE.importable_path
    tag = "FlowCanvas"
    lib_dependencies: list[str] = [XYFLOW]

    nodes: rx.Var[list[dict[str, Any]]]
    edges: rx.Var[list[dict[str, Any]]]
    # The selection as the state knows it (it selects a dropped node, clears it on another view).
    selected_ids: rx.Var[list[str]]
    read_only: rx.Var[bool]
    # Changing it fits the view to the nodes (after loading another graph or version).
    fit_revision: rx.Var[int]

    # [{id, x, y}] of the nodes a drag moved, once the drag stops.
    on_nodes_moved: rx.EventHandler[passthrough_event_spec(list[dict[str, Any]])]
    # {source, sourceHandle, target}: the state checks the graph rules and adds or refuses it.
    on_connect_nodes: rx.EventHandler[passthrough_event_spec(dict[str, Any])]
    # {nodes: [ids], edges: [ids]} removed with Delete/Backspace.
    on_delete_elements: rx.EventHandler[passthrough_event_spec(dict[str, Any])]
    # {type, x, y}: a palette entry dropped on the canvas, in flow coordinates.
    on_drop_node: rx.EventHandler[passthrough_event_spec(dict[str, Any])]
    # [ids] of the selected nodes.
    on_selection_changed: rx.EventHandler[passthrough_event_spec(list[str])]
    # id of a double-clicked node.
    on_node_opened: rx.EventHandler[passthrough_event_spec(str)]
    # Ctrl/Cmd+Z (undo), Ctrl/Cmd+Shift+Z or Ctrl+Y (redo) outside text fields.
    on_undo: rx.EventHandler[no_args_event_spec]
    on_redo: rx.EventHandler[no_args_event_spec]
    # The browser's IANA time zone, reported once (new schedule triggers start in it).
    on_time_zone: rx.EventHandler[passthrough_event_spec(str)]


flow_canvas = FlowCanvas.create
