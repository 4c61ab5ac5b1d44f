#!/usr/bin/env bash
# check_install.sh BUILD - `make install` into a scratch prefix, then build and run a
# plain C program against it through pkg-config, as a user would.
set -eu
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name warpspec.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: no warpspec.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
cat >"$prefix/user.c" <<'C'
#include <stdio.h>
#include <warpspec/warpspec.h>
int main(void) {
  const ws_role roles[] = {{"producer", 1, 40, 1}, {"consumer", 4, 232, 2}};
  ws_plan plan;
  if (ws_plan_init(&plan, "user", roles, 2, 0) != WS_OK) { printf("%s\n", ws_last_error()); return 1; }
  printf("warpspec %s: %d threads\n", ws_version(), plan.layout.threads);
  return plan.layout.threads == 384 ? 0 : 1;
}
C
# pkg-config may be missing on a bare machine: fall back to the same flags by hand.
libdir=$(dirname "$(dirname "$pc")")
if command -v pkg-config >/dev/null; then
  flags=$(pkg-config --cflags --libs warpspec)
else
  field() { sed -n "s/^$1: //p" "$pc" | sed -e 's#[$][{]includedir[}]#'"$prefix/include"'#g' -e 's#[$][{]libdir[}]#'"$libdir"'#g'; }
  flags="$(field Cflags) $(field Libs)"
fi
gcc -std=c11 -Wall -Wextra -Werror "$prefix/user.c" -o "$prefix/user" $flags -Wl,-rpath,"$libdir"
"$prefix/user"
"$prefix/bin/warpspec" version
echo "ok: installed headers, library, pkg-config file and CLI work"
