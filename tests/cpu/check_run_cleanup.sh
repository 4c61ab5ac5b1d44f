#!/usr/bin/env bash
# check_run_cleanup.sh WARPSPEC - `warpspec run` hands each rank a private folder (mode
# 0700, under $TMPDIR) and a job key, and removes the folder on every way out: success,
# a failing rank, --timeout, and SIGTERM / SIGINT to the launcher (ranks stopped too).
# What a rank started (a grandchild of the launcher) ends with the rank on --timeout and
# on SIGTERM; a SIGKILLed launcher takes its ranks with it.
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
# grandchildren: each rank starts a sleep in the background and waits for it (the sleep
# is not the launcher's child); a unique duration finds survivors
survivors() { pgrep -f "sleep $1" | wc -l; }
sweep() { pkill -9 -f "sleep $1" 2>/dev/null; true; }
"$ws" run -n 2 --timeout 1 -- sh -c 'sleep 7771 & wait'; rc=$?
sleep 0.5
left=$(survivors 7771)
[ $rc -eq 124 ] && [ "$left" -eq 0 ] && echo "ok   timeout: the ranks' children stopped too" ||
  { echo "FAIL timeout with grandchildren: exit $rc, $left left running"; fail=1; }
sweep 7771
"$ws" run -n 2 -- sh -c 'echo $$ > "$TMPDIR/pid.$WS_RANK"; sleep 7772 & wait' &
launcher=$!
for _ in $(seq 100); do [ -s "$tmp/pid.0" ] && [ -s "$tmp/pid.1" ] && break; sleep 0.05; done
sleep 0.2
kill -s TERM $launcher
wait $launcher
sleep 0.5
left=$(survivors 7772)
[ "$left" -eq 0 ] && echo "ok   SIGTERM: the ranks' children stopped too" || { echo "FAIL SIGTERM: $left grandchildren left"; fail=1; }
sweep 7772
rm -f "$tmp"/pid.*
# the launcher killed outright: the ranks die with it (PR_SET_PDEATHSIG)
"$ws" run -n 2 -- sh -c 'echo $$ > "$TMPDIR/pid.$WS_RANK"; exec sleep 7773' &
launcher=$!
for _ in $(seq 100); do [ -s "$tmp/pid.0" ] && [ -s "$tmp/pid.1" ] && break; sleep 0.05; done
kill -s KILL $launcher
wait $launcher 2>/dev/null
sleep 0.5
left=$(survivors 7773)
[ "$left" -eq 0 ] && echo "ok   SIGKILL of the launcher: its ranks are gone" || { echo "FAIL SIGKILL: $left rank(s) left"; fail=1; }
sweep 7773
rm -rf "$tmp"/warpspec-run-* "$tmp"/pid.* # the folder a killed launcher cannot remove
exit $fail
