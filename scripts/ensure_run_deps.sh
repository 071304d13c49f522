#!/usr/bin/env bash
# System packages the product needs to run (called by `make setup`, so by `make run`, `make dev`
# and `make test`): bubblewrap (`bwrap` on PATH) and the system python3 (/usr/bin/python3), with
# which the script.python node runs code in its sandbox.
#
# Idempotent and quick when both are present (no output). When something is missing and we are
# root with apt-get, it is installed (`apt-get update` first only when the install fails, e.g. for
# a stale package list). When it cannot be installed (not root, no apt-get, the install failed)
# ONE line on stderr names the command to run, and the set-up goes on: everything but
# script.python works without them.
#
# POWERON_ASSUME_NOT_ROOT=1 treats the caller as not root (for tests of the hint).
set -uo pipefail

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
[ -x /usr/bin/python3 ] || missing+=(python3)
[ ${#missing[@]} -eq 0 ] && exit 0

hint() {
  echo "PowerOn: script.python nodes are disabled (missing: ${missing[*]}); to enable them run: sudo apt-get install ${missing[*]}" >&2
  exit 0
}

is_root() {
  [ "${POWERON_ASSUME_NOT_ROOT:-}" != "1" ] && [ "$(id -u 2>/dev/null)" = "0" ]
}

is_root || hint
command -v apt-get >/dev/null 2>&1 || hint
echo "PowerOn: installing ${missing[*]} (for script.python) ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; }
apt_install || { apt-get update -qq >/dev/null 2>&1 && apt_install; } || hint
command -v bwrap >/dev/null 2>&1 && [ -x /usr/bin/python3 ] || hint
