#!/usr/bin/env bash
# check_run_cleanup.sh WARPSPEC - `warpspec run` hands each rank a private folder (mode
# 0700, under $TMPDIR) and a job key, and removes the folder on every way out: success,
# a failing rank, --timeout, and SIGTERM / SIGINT to the launcher (ranks stopped too).
set -u
ws=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
fail=0
check_gone() { # what
  local left
  left=$(find "$tmp" -mindepth 1 -maxdepth 1 -name 'warpspec-run-*' | wc -l)
  if [ "$left" -ne 0 ]; then echo "FAIL $1: $left folder(s) left in $tmp"; fail=1; else echo "ok   $1: folder removed"; fi
}
rank_script='echo "$WS_RENDEZVOUS_DIR $WS_RENDEZVOUS_KEY $(stat -c %a "$WS_RENDEZVOUS_DIR")" > "$TMPDIR/seen.$WS_RANK"; touch "$WS_RENDEZVOUS_DIR/left.$WS_RANK"'
"$ws" run -n 2 -- sh -c "$rank_script" || { echo "FAIL success case exited $?"; fail=1; }
read -r d0 k0 m0 <"$tmp/seen.0"; read -r d1 k1 m1 <"$tmp/seen.1"
[ "$d0" = "$d1" ] && [ "$k0" = "$k1" ] && [ -n "$k0" ] && [ "$m0" = 700 ] && case $d0 in "$tmp"/warpspec-run-*) true ;; *) false ;; esac \
  && echo "ok   ranks share a 0700 folder under TMPDIR and a job key ($k0)" || { echo "FAIL folder/key: $d0 $k0 $m0 / $d1 $k1 $m1"; fail=1; }
check_gone "success (files the ranks left included)"
"$ws" run -n 2 -- sh -c 'touch "$WS_RENDEZVOUS_DIR/x.$WS_RANK"; exit $WS_RANK'; rc=$?
[ $rc -eq 1 ] && echo "ok   a failing rank: exit 1" || { echo "FAIL failing rank: exit $rc"; fail=1; }
check_gone "a failing rank"
"$ws" run -n 2 --timeout 1 -- sleep 30; rc=$?
[ $rc -eq 124 ] && echo "ok   timeout: exit 124" || { echo "FAIL timeout: exit $rc"; fail=1; }
check_gone "timeout"
for sig in TERM INT; do
  # the ranks write their pids, then sleep; the launcher gets the signal
  "$ws" run -n 2 -- sh -c 'echo $$ > "$TMPDIR/pid.$WS_RANK"; exec sleep 30' &
  launcher=$!
  for _ in $(seq 100); do [ -s "$tmp/pid.0" ] && [ -s "$tmp/pid.1" ] && break; sleep 0.05; done
  kill -s $sig $launcher
  wait $launcher; rc=$?
  want=$((128 + $(kill -l $sig)))
  [ $rc -eq $want ] && echo "ok   SIG$sig: exit $rc" || { echo "FAIL SIG$sig: exit $rc, expected $want"; fail=1; }
  for r in 0 1; do
    p=$(cat "$tmp/pid.$r" 2>/dev/null)
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then echo "FAIL SIG$sig: rank $r (pid $p) still running"; kill -9 "$p"; fail=1; fi
  done
  rm -f "$tmp"/pid.*
  check_gone "SIG$sig"
done
exit $fail
