#!/bin/bash
# run.sh: the /inference page suite (R-ADM-3, R-SEC-7) and CORS from other origins (R-API-7,
# cors.mjs): Debian's chromium, headless, driven
# by playwright-core through ui.test.mjs against a real gateway started by env.py.
# A missing browser or package is a failure, never a skip. Screenshots go to
# $SLUICE_TEST_OUT/ui/. The last line is "N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
if [ -w "$here" ]; then
  cd "$here" || exit 1
else
  # make distcheck: the source tree is read-only, so npm installs into a copy.
  work="${SLUICE_TEST_OUT:-/tmp}/ui-suite"
  mkdir -p "$work" && cp "$here"/*.json "$here"/*.mjs "$here"/*.py "$here"/*.sh "$work"/ && cd "$work" || exit 1
fi

die() { echo "ui/run.sh: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

export SLUICE_CHROMIUM=${SLUICE_CHROMIUM:-/usr/bin/chromium}
[ -x "$SLUICE_CHROMIUM" ] || die "no browser at $SLUICE_CHROMIUM: apt-get install chromium (./quickstart test does)"
command -v node >/dev/null || die "node not found: apt-get install nodejs npm"
if [ ! -f node_modules/playwright-core/package.json ]; then
  npm ci --no-audit --no-fund >&2 || die "npm ci failed"
fi
out_dir=${SLUICE_TEST_OUT:-$(pwd)/../../test-output}/ui
mkdir -p "$out_dir" || die "cannot create $out_dir"
export SLUICE_UI_OUT=$out_dir

# env.py runs beside us on two pipes: it prints one JSON line when the gateway is up, and
# stops what it started when its stdin reaches EOF (we close our end, or die).
fifo_dir=$(mktemp -d)
mkfifo "$fifo_dir/in" "$fifo_dir/out" || die "mkfifo failed"
python3 env.py < "$fifo_dir/in" > "$fifo_dir/out" &
env_pid=$!
exec {to_env}>"$fifo_dir/in" {from_env}<"$fifo_dir/out"
rm -rf "$fifo_dir"
stop_env() {
  [ -n "${to_env:-}" ] || return 0
  exec {to_env}>&- {from_env}<&-
  to_env=
  for _ in $(seq 1 300); do kill -0 "$env_pid" 2>/dev/null || break; sleep 0.1; done
  kill "$env_pid" 2>/dev/null
  wait "$env_pid" 2>/dev/null
}
trap stop_env EXIT

line=
read -r -t 60 line <&"$from_env" || true
[ -n "$line" ] || die "env.py did not start the gateway (its errors are above)"
export SLUICE_UI_ENV=$line
echo "# gateway $(printf '%s' "$line" | python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["base_url"], "logs", e["gw_dir"])')"

tap=$(mktemp)
# node must not inherit the env.py pipes, or env.py would outlive a killed run.
timeout 300 node --test --test-reporter=tap ui.test.mjs {to_env}>&- {from_env}<&- 2>&1 | tee "$tap"
stop_env

pass=$(sed -n 's/^# pass \([0-9][0-9]*\)$/\1/p' "$tap" | tail -n 1)
fail=$(sed -n 's/^# fail \([0-9][0-9]*\)$/\1/p' "$tap" | tail -n 1)
rm -f "$tap"
[ -n "$pass" ] && [ -n "$fail" ] || { echo "ui/run.sh: no summary from node's test runner" >&2; echo "${pass:-0} passed, $(( ${fail:-0} + 1 )) failed"; exit 1; }
echo "# screenshots in $out_dir"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
