// The workflow canvas: @xyflow/react (React Flow 12) driven by the editor's Reflex state.
//
// Python owns the graph. This component keeps a local copy of the nodes only so dragging is
// smooth, and reports settled changes (drag stop, connect, delete, drop) as small diffs; the
// state applies them, saves the draft and sends the new nodes/edges back.
import React, { memo, useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  Background,
  Controls,
  Handle,
  MiniMap,
  Position,
  ReactFlow,
  ReactFlowProvider,
  useNodesState,
  useReactFlow,
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
const FIT_OPTIONS = { padding: 0.2, maxZoom: 1 };

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
  } = props;
  const [nodes, setNodes, onNodesChange] = useNodesState(propNodes);
  const [selectedEdges, setSelectedEdges] = useState(new Set());
  const flow = useReactFlow();
  const lastSelection = useRef("");

  // The state sends the selection with the nodes (it selects what was just dropped); the user's
  // clicks change it here first and are reported, so both sides agree without a round trip.
  useEffect(() => {
    const chosen = new Set(selectedIds);
    setNodes(propNodes.map((node) => (chosen.has(node.id) ? { ...node, selected: true } : node)));
    lastSelection.current = selectedIds.join("\n");
  }, [propNodes, selectedIds, setNodes]);

  useEffect(() => {
    if (fitRevision) {
      // After the new nodes have been measured.
      requestAnimationFrame(() => flow.fitView(FIT_OPTIONS));
    }
  }, [fitRevision, flow]);

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
      fitView
      fitViewOptions={FIT_OPTIONS}
      minZoom={0.1}
      maxZoom={2}
      onlyRenderVisibleElements
      proOptions={{ hideAttribution: true }}
    >
      <Background gap={16} />
      <Controls showInteractive={false} />
      <MiniMap pannable zoomable nodeColor={(node) => STATUS_COLOURS[node.data?.status] || "#cdced6"} />
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
