#!/usr/bin/env bash
# run_ab.sh KNOB[=V1,V2,...] [ROUNDS] -- COMMAND...  - an environment knob's A/B in one
# call: COMMAND under each value (0 and 1 unless listed), ROUNDS times (default 2)
# alternating, so that every side sees the same machine and the same drift. Prints
# COMMAND's "rank 0" lines (every line if it prints none), each prefixed with the value and
# the round; stops at the first failing run. Example (the dispatch's overlap, 4 GPUs):
#   bash tests/gpu/run_ab.sh WARPSPEC_EP_OVERLAP=0,1 2 -- build/warpspec \
#     bench ep --ranks 4 --tokens 4096 --sms 48 --receive copy
set -u
knob=${1%%=*}
values=0,1
case $1 in *=*) values=${1#*=} ;; esac
shift
rounds=2
if [ "${1:-}" != "--" ]; then rounds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || { echo "usage: run_ab.sh KNOB[=V1,V2,...] [ROUNDS] -- COMMAND..."; exit 2; }
. "$(dirname "$0")/env.sh"
log=$(mktemp)
for r in $(seq 1 "$rounds"); do
  for v in ${values//,/ }; do
    env "$knob=$v" "$@" >"$log" 2>&1
    rc=$?
    # the prefix by the shell, not sed: a value may hold '/' (a build directory)
    if grep -q "rank 0" "$log"; then grep "rank 0" "$log"; else cat "$log"; fi |
      while IFS= read -r line; do printf '%s=%s r%s: %s\n' "$knob" "$v" "$r" "$line"; done
    [ $rc -eq 0 ] || { echo "$knob=$v r$r: exit $rc"; rm -f "$log"; exit $rc; }
  done
done
rm -f "$log"
