#!/usr/bin/env bash
# System packages the test suite uses: Chromium (Playwright drives the system browser),
# PostgreSQL (the persistence tests start a throw-away server), Redis (the multi-worker tests start
# a throw-away redis-server for Reflex's shared UI state), and bubblewrap plus the system
# python3 (the script.python sandbox runs code with them). Installed with apt when root.
# Then the MCP Inspector and server-everything (scripts/ensure_mcp_tools.sh).
# bubblewrap and python3 are the product's own needs: scripts/ensure_run_deps.sh (make's
# system-deps, run before this) installs them already; here they are only required, so a test run
# without them stops at once instead of failing the sandbox tests.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
[ -x /usr/bin/python3 ] || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${missing[*]} (install them, e.g. sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "Installing ${missing[*]} ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
# The MCP Inspector and the reference MCP server (npm, Node.js 24) the MCP tests use.
scripts/ensure_mcp_tools.sh
