#!/usr/bin/env bash
# check_run_cleanup.sh WARPSPEC - `warpspec run` hands each rank a private folder (mode
# 0700, under $TMPDIR) and a job key, and removes the folder on every way out: success,
# a failing rank, --timeout, and SIGTERM / SIGINT to the launcher (ranks stopped too).
# What a rank starts goes with it: a grandchild is gone after --timeout and SIGTERM, and
# the ranks after SIGKILL to the launcher (that folder stays, named by the launcher's pid).
set -u
ws=$1
tmp=$(mktemp -d)
# sleeps with durations unique to this run, so that survivors are found by name and
# nothing else is touched; the script ends any it finds
nap=7771.$$
survivors() { pgrep -f "^sleep 777[0-9]\\.$$\$"; }
end_survivors() { for p in $(survivors); do kill -9 "$p" 2>/dev/null; done; }
trap 'end_survivors; rm -rf "$tmp"' EXIT
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

wait_for_sleeps() { # count
  for _ in $(seq 100); do [ "$(survivors | wc -l)" -ge "$1" ] && return 0; sleep 0.05; done
  echo "FAIL the ranks did not start their sleeps"; fail=1
}
check_no_survivors() { # what
  local left=""
  for _ in $(seq 40); do left=$(survivors); [ -z "$left" ] && break; sleep 0.05; done
  if [ -n "$left" ]; then echo "FAIL $1: left running: $(echo $left)"; end_survivors; fail=1; else echo "ok   $1: nothing left running"; fi
}
# `sh -c 'X & wait'` keeps the shell as the rank and the sleep as its child: stopping
# only the rank leaves the sleep behind.
"$ws" run -n 2 --timeout 1 -- sh -c "sleep $nap & wait"; rc=$?
[ $rc -eq 124 ] && echo "ok   timeout with grandchildren: exit 124" || { echo "FAIL timeout with grandchildren: exit $rc"; fail=1; }
check_no_survivors "timeout, grandchildren"
check_gone "timeout, grandchildren"
"$ws" run -n 2 -- sh -c "sleep $nap & wait" &
launcher=$!
wait_for_sleeps 2
kill -s TERM $launcher
wait $launcher; rc=$?
[ $rc -eq 143 ] && echo "ok   SIGTERM with grandchildren: exit 143" || { echo "FAIL SIGTERM with grandchildren: exit $rc"; fail=1; }
check_no_survivors "SIGTERM, grandchildren"
check_gone "SIGTERM, grandchildren"
# SIGKILL: nothing of the launcher runs, the ranks die with it (their folder stays)
"$ws" run -n 2 -- sleep $nap &
launcher=$!
wait_for_sleeps 2
kill -s KILL $launcher
wait $launcher 2>/dev/null
check_no_survivors "SIGKILL to the launcher, ranks"
left=$(find "$tmp" -mindepth 1 -maxdepth 1 -name "warpspec-run-$launcher-*" | wc -l)
[ "$left" -eq 1 ] && echo "ok   SIGKILL: the folder stays, named by the launcher's pid" \
  || { echo "FAIL SIGKILL: $left folder(s) named warpspec-run-$launcher-* in $tmp"; fail=1; }
rm -rf "$tmp"/warpspec-run-*
# a folder the launcher cannot remove (a rank made a subfolder) is reported
"$ws" run -n 1 -- sh -c 'mkdir "$WS_RENDEZVOUS_DIR/sub"' 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "cannot remove the rendezvous folder $tmp/warpspec-run-" "$tmp/err"; then
  echo "ok   a folder left behind is reported"
else
  echo "FAIL a folder left behind: exit $rc, stderr: $(cat "$tmp/err")"; fail=1
fi
rm -rf "$tmp"/warpspec-run-*
exit $fail
