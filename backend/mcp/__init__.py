"""MCP both ways (issue 19).

- ``server``: PowerOn's tools served at ``/mcp`` (Streamable HTTP, the official ``mcp`` SDK).
- ``client`` / ``servers`` / ``toolboxes``: external MCP servers a mandate admin registers, each
  a toolbox ``mcp:<name>`` of the action catalogue (``backend/actions/catalogue.py``).
"""
