#!/usr/bin/env bash
# Runs a command in its own process group and stops the whole group when we are interrupted
# (Ctrl-C, SIGTERM) or when our parent (make) goes away, so no server outlives `make run`.
set -u
parent=$PPID
setsid "$@" &
child=$!

stop() {
  kill -TERM -- "-$child" 2>/dev/null
  for _ in $(seq 1 50); do
    kill -0 -- "-$child" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL -- "-$child" 2>/dev/null
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM HUP

while kill -0 "$child" 2>/dev/null; do
  if ! kill -0 "$parent" 2>/dev/null; then stop; exit 143; fi
  sleep 1 &
  wait $! 2>/dev/null
done
wait "$child"
