// The workflow canvas: @xyflow/react (React Flow 12) driven by the editor's Reflex state.
//
// Python owns the graph. This component keeps a local copy of the nodes only so dragging is
// smooth, and reports settled changes (drag stop, connect, delete, drop) as small diffs; the
// state applies them, saves the draft and sends the new nodes/edges back. It also reports the
// browser's time zone once (new schedules start in it) and Ctrl/Cmd+Z, Ctrl+Shift+Z, Ctrl+Y.
import React, { memo, useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  Background,
  ControlButton,
  Controls,
  Handle,
  MiniMap,
  Position,
  ReactFlow,
  ReactFlowProvider,
  useNodesState,
  useReactFlow,
  useStoreApi,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import "./flow_canvas.css";

const DRAG_MIME = "application/x-poweron-node-type";
const STATUS_COLOURS = {
  pending: "#8b8d98",
  running: "#3e63dd",
  completed: "#30a46c",
  failed: "#e5484d",
  paused: "#f76b15",
  skipped: "#b9bbc6",
  cancelled: "#b9bbc6",
};
const HANDLE_GAP = 22;
const NO_IDS = [];
// The minimap (bottom right) and the controls (bottom left), in screen pixels: a fit keeps the
// nodes clear of them.
const MINIMAP = { width: 150, height: 100, margin: 15 };
const CONTROLS_WIDTH = 27 + 15;
const GAP = 24; // around the nodes after a fit (the attribution sits in the top-right corner)
const MAX_FIT_ZOOM = 1;
const MIN_ZOOM = 0.1;
const MINIMAP_KEY = "poweron.canvas.minimap";

// Paddings (px) for a fit that keeps every node clear of the minimap and the controls: either
// beside them (the nodes end left of the minimap) or above them, whichever leaves the nodes larger.
function fitPadding(bounds, width, height, minimap) {
  const plain = { top: GAP, right: GAP, bottom: GAP, left: GAP };
  if (!minimap || !bounds.width || !bounds.height) return plain;
  const beside = { ...plain, left: CONTROLS_WIDTH + GAP, right: MINIMAP.width + MINIMAP.margin + GAP };
  const above = { ...plain, bottom: MINIMAP.height + MINIMAP.margin + GAP };
  const zoom = (p) => Math.min((width - p.left - p.right) / bounds.width, (height - p.top - p.bottom) / bounds.height);
  return zoom(beside) >= zoom(above) ? beside : above;
}

function inPixels(padding) {
  return Object.fromEntries(Object.entries(padding).map(([side, value]) => [side, value + "px"]));
}

function measured(node) {
  return (node.measured?.width ?? node.width) !== undefined && (node.measured?.height ?? node.height) !== undefined;
}

// Whether a key press belongs to a text field (there the browser's own text undo stays).
function typing(target) {
  return Boolean(target && (target.isContentEditable || target.closest?.("input, textarea, select")));
}

function FitIcon() {
  return (
    <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 30">
      <path d="M3.692 4.63c0-.53.4-.938.939-.938h5.215V0H4.708C2.13 0 0 2.054 0 4.63v5.216h3.692V4.631zM27.354 0h-5.2v3.692h5.17c.53 0 .984.4.984.939v5.215H32V4.631A4.624 4.624 0 0027.354 0zm.954 24.83c0 .532-.4.94-.939.94h-5.215v3.768h5.215c2.577 0 4.631-2.13 4.631-4.707v-5.139h-3.692v5.139zm-23.677.94c-.531 0-.939-.4-.939-.94v-5.138H0v5.139c0 2.577 2.13 4.707 4.708 4.707h5.138V25.77H4.631z" />
    </svg>
  );
}

function MapIcon() {
  return (
    <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="2.4"
         strokeLinecap="round" strokeLinejoin="round" style={{ fill: "none" }}>
      <path d="M3 6l6-3 6 3 6-3v15l-6 3-6-3-6 3z" />
      <path d="M9 3v15M15 6v15" />
    </svg>
  );
}

function storedMinimap() {
  try {
    return window.localStorage.getItem(MINIMAP_KEY) !== "hidden";
  } catch (_error) {
    return true;
  }
}

// Palette entries are plain elements with data-node-type; one document-level listener turns
// their drag into a typed payload, so the palette needs no JavaScript of its own.
if (typeof document !== "undefined" && !window.__poweronPaletteDrag) {
  window.__poweronPaletteDrag = true;
  document.addEventListener("dragstart", (event) => {
    const item = event.target?.closest?.("[data-node-type]");
    if (!item || !event.dataTransfer) return;
    event.dataTransfer.setData(DRAG_MIME, item.getAttribute("data-node-type"));
    event.dataTransfer.effectAllowed = "copy";
  });
}

function PowerOnNode({ id, data, selected }) {
  const handles = data.handles || [];
  const status = data.status || "";
  const colour = STATUS_COLOURS[status];
  const height = Math.max(54, 22 + handles.length * HANDLE_GAP);
  const style = {
    minHeight: height,
    borderColor: colour || (data.invalid ? "#e5484d" : selected ? "#3e63dd" : "#cdced6"),
    borderStyle: status === "skipped" ? "dashed" : "solid",
    boxShadow: selected ? "0 0 0 2px rgba(62,99,221,0.35)" : undefined,
  };
  return (
    <div className={"poweron-node" + (status ? " status-" + status : "")} data-testid={"node-" + id}
         data-status={status} data-invalid={data.invalid ? "true" : "false"} style={style}
         title={data.problem || data.description || ""}>
      {data.isTrigger ? null : <Handle type="target" position={Position.Left} id="in" />}
      <div className="poweron-node-label">{data.label || id}</div>
      <div className="poweron-node-type">{data.nodeType}</div>
      {status ? <div className="poweron-node-status" style={{ color: colour }}>{status}</div> : null}
      {handles.map((handle, index) => {
        const top = handles.length === 1 ? "50%" : 18 + index * HANDLE_GAP;
        return (
          <React.Fragment key={handle}>
            <Handle type="source" position={Position.Right} id={handle} style={{ top }}
                    data-testid={"handle-" + id + "-" + handle} />
            {handle === "out" ? null : (
              <div className="poweron-handle-label" style={{ top }}>{handle}</div>
            )}
          </React.Fragment>
        );
      })}
    </div>
  );
}

// Defined once at module level: React Flow re-mounts every node when nodeTypes changes identity.
const NODE_TYPES = { poweron: memo(PowerOnNode) };

function Canvas(props) {
  const {
    nodes: propNodes = [],
    edges: propEdges = [],
    selectedIds = NO_IDS,
    readOnly = false,
    fitRevision = 0,
    onNodesMoved,
    onConnectNodes,
    onDeleteElements,
    onDropNode,
    onSelectionChanged,
    onNodeOpened,
    onUndo,
    onRedo,
    onTimeZone,
  } = props;
  const [nodes, setNodes, onNodesChange] = useNodesState(propNodes);
  const [selectedEdges, setSelectedEdges] = useState(new Set());
  const [minimap, setMinimap] = useState(true);
  const flow = useReactFlow();
  const store = useStoreApi();
  const lastSelection = useRef("");

  // The state sends the selection with the nodes (it selects what was just dropped); the user's
  // clicks change it here first and are reported, so both sides agree without a round trip.
  useEffect(() => {
    const chosen = new Set(selectedIds);
    setNodes(propNodes.map((node) => (chosen.has(node.id) ? { ...node, selected: true } : node)));
    lastSelection.current = selectedIds.join("\n");
  }, [propNodes, selectedIds, setNodes]);

  // Fit the view to the nodes, clear of the minimap and the controls, once they are measured.
  const fit = useCallback(
    (tries = 30) => {
      const current = flow.getNodes();
      if (current.some((node) => !measured(node)) && tries > 0) {
        requestAnimationFrame(() => fit(tries - 1));
        return;
      }
      if (!current.length) return;
      const { width, height } = store.getState();
      const padding = fitPadding(flow.getNodesBounds(current), width, height, minimap);
      flow.fitView({ padding: inPixels(padding), maxZoom: MAX_FIT_ZOOM, minZoom: MIN_ZOOM });
    },
    [flow, store, minimap],
  );
  const fitRef = useRef(fit);
  fitRef.current = fit;

  useEffect(() => {
    // On the first render and whenever the state asks (another graph or version was loaded, a
    // panel folded): two frames later, when the canvas's new size has been measured.
    let frame = requestAnimationFrame(() => {
      frame = requestAnimationFrame(() => fitRef.current());
    });
    return () => cancelAnimationFrame(frame);
  }, [fitRevision]);

  useEffect(() => {
    setMinimap(storedMinimap());
  }, []);

  // The state selected one node (just added from the palette, or a trace row was clicked): when it
  // lies outside the visible part of the canvas, pan to it (the zoom stays), once it is measured.
  useEffect(() => {
    if (selectedIds.length !== 1) return undefined;
    let frame = 0;
    const reveal = (tries) => {
      const node = flow.getInternalNode(selectedIds[0]);
      if (!node || !measured(node)) {
        if (tries > 0) frame = requestAnimationFrame(() => reveal(tries - 1));
        return;
      }
      const { width, height, transform } = store.getState();
      const [x, y, zoom] = transform;
      const { x: left, y: top } = node.internals.positionAbsolute;
      const right = left + (node.measured?.width ?? node.width ?? 0);
      const bottom = top + (node.measured?.height ?? node.height ?? 0);
      const visible = left >= -x / zoom && top >= -y / zoom && right <= (width - x) / zoom && bottom <= (height - y) / zoom;
      if (!visible) flow.setCenter((left + right) / 2, (top + bottom) / 2, { zoom, duration: 200 });
    };
    frame = requestAnimationFrame(() => reveal(30));
    return () => cancelAnimationFrame(frame);
  }, [selectedIds, flow, store]);

  const toggleMinimap = useCallback(() => {
    setMinimap((shown) => {
      try {
        window.localStorage.setItem(MINIMAP_KEY, shown ? "hidden" : "shown");
      } catch (_error) {
        // private mode: the choice lasts for this page only
      }
      return !shown;
    });
  }, []);

  useEffect(() => {
    if (!onTimeZone) return;
    let zone = "UTC";
    try {
      zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    } catch (_error) {
      // an old browser: the server falls back to UTC as well
    }
    onTimeZone(zone);
    // Once per page: the time zone of a browser does not change while it shows the editor.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  // Undo and redo from the keyboard, unless a text field has the focus (its own undo applies).
  useEffect(() => {
    if (readOnly) return undefined;
    const onKey = (event) => {
      if (!(event.ctrlKey || event.metaKey) || event.altKey || typing(event.target)) return;
      const key = (event.key || "").toLowerCase();
      const redo = (key === "z" && event.shiftKey) || (key === "y" && !event.shiftKey);
      if (key === "z" && !event.shiftKey) {
        event.preventDefault();
        if (onUndo) onUndo();
      } else if (redo) {
        event.preventDefault();
        if (onRedo) onRedo();
      }
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [readOnly, onUndo, onRedo]);

  const edges = useMemo(
    () => propEdges.map((edge) => (selectedEdges.has(edge.id) ? { ...edge, selected: true } : edge)),
    [propEdges, selectedEdges],
  );

  const onEdgesChange = useCallback((changes) => {
    setSelectedEdges((current) => {
      const next = new Set(current);
      for (const change of changes) {
        if (change.type === "select") {
          if (change.selected) next.add(change.id);
          else next.delete(change.id);
        } else if (change.type === "remove") {
          next.delete(change.id);
        }
      }
      return next;
    });
  }, []);

  const onNodeDragStop = useCallback(
    (_event, _node, dragged) => {
      if (!onNodesMoved || readOnly) return;
      onNodesMoved(
        dragged.map((node) => ({
          id: node.id,
          x: Math.round(node.position.x),
          y: Math.round(node.position.y),
        })),
      );
    },
    [onNodesMoved, readOnly],
  );

  const onConnect = useCallback(
    (connection) => {
      if (!onConnectNodes || readOnly) return;
      onConnectNodes({
        source: connection.source,
        sourceHandle: connection.sourceHandle || "out",
        target: connection.target,
      });
    },
    [onConnectNodes, readOnly],
  );

  const onDelete = useCallback(
    ({ nodes: gone, edges: goneEdges }) => {
      if (!onDeleteElements || readOnly) return;
      onDeleteElements({ nodes: gone.map((node) => node.id), edges: goneEdges.map((edge) => edge.id) });
    },
    [onDeleteElements, readOnly],
  );

  const onSelectionChange = useCallback(
    ({ nodes: chosen }) => {
      const ids = chosen.map((node) => node.id);
      const key = ids.join("\n");
      if (key === lastSelection.current || !onSelectionChanged) return;
      lastSelection.current = key;
      onSelectionChanged(ids);
    },
    [onSelectionChanged],
  );

  const onNodeDoubleClick = useCallback(
    (_event, node) => onNodeOpened && onNodeOpened(node.id),
    [onNodeOpened],
  );

  const onDragOver = useCallback((event) => {
    if (event.dataTransfer?.types?.includes(DRAG_MIME)) {
      event.preventDefault();
      event.dataTransfer.dropEffect = "copy";
    }
  }, []);

  const onDrop = useCallback(
    (event) => {
      const type = event.dataTransfer?.getData(DRAG_MIME);
      if (!type || !onDropNode || readOnly) return;
      event.preventDefault();
      const position = flow.screenToFlowPosition({ x: event.clientX, y: event.clientY });
      onDropNode({ type, x: Math.round(position.x), y: Math.round(position.y) });
    },
    [flow, onDropNode, readOnly],
  );

  const isValidConnection = useCallback(
    (connection) => connection.source !== connection.target,
    [],
  );

  return (
    <ReactFlow
      nodes={nodes}
      edges={edges}
      nodeTypes={NODE_TYPES}
      onNodesChange={onNodesChange}
      onEdgesChange={onEdgesChange}
      onNodeDragStop={onNodeDragStop}
      onConnect={onConnect}
      onDelete={onDelete}
      onSelectionChange={onSelectionChange}
      onNodeDoubleClick={onNodeDoubleClick}
      onDragOver={onDragOver}
      onDrop={onDrop}
      isValidConnection={isValidConnection}
      nodesDraggable={!readOnly}
      nodesConnectable={!readOnly}
      elementsSelectable
      deleteKeyCode={readOnly ? null : ["Delete", "Backspace"]}
      multiSelectionKeyCode={["Shift", "Meta", "Control"]}
      minZoom={MIN_ZOOM}
      maxZoom={2}
      attributionPosition="top-right"
    >
      <Background gap={16} />
      <Controls showInteractive={false} showFitView={false}>
        <ControlButton onClick={() => fit()} className="react-flow__controls-fitview" title="Fit view"
                       aria-label="Fit view">
          <FitIcon />
        </ControlButton>
        <ControlButton onClick={toggleMinimap} className="poweron-minimap-toggle"
                       title={minimap ? "Hide the minimap" : "Show the minimap"}
                       aria-label={minimap ? "Hide the minimap" : "Show the minimap"}
                       data-shown={minimap ? "true" : "false"}>
          <MapIcon />
        </ControlButton>
      </Controls>
      {minimap ? (
        <MiniMap pannable zoomable style={{ width: MINIMAP.width, height: MINIMAP.height }}
                 nodeColor={(node) => STATUS_COLOURS[node.data?.status] || "#cdced6"} />
      ) : null}
    </ReactFlow>
  );
}

export function FlowCanvas(props) {
  const { id, className, style, ...rest } = props;
  return (
    <div id={id} className={"poweron-flow " + (className || "")} style={{ width: "100%", height: "100%", ...style }}>
      <ReactFlowProvider>
        <Canvas {...rest} />
      </ReactFlowProvider>
    </div>
  );
}
