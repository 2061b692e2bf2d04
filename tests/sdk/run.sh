#!/bin/bash
# run.sh: the OpenAI Node SDK suite (R-API-1..4, R-API-8, R-USE-1..2, R-SSE-4 seen through `openai`).
# Installs the pinned SDK when node_modules is missing, starts the environment (env.py:
# lighttpd + sluice-fcgi pool + a stand-in upstream behind route `m` and one speaking Anthropic
# Messages behind route `claude`), runs `node --test
# sdk.test.mjs` against it, stops the environment, and ends with "N passed, N failed".
# Honours SLUICE_BUILDDIR / SLUICE_SRCDIR / SLUICE_TEST_OUT like the end-to-end tests.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
if [ -w "$here" ]; then
  cd "$here" || exit 1
else
  # make distcheck: the source tree is read-only, so npm installs into a copy.
  work="${SLUICE_TEST_OUT:-/tmp}/sdk-suite"
  mkdir -p "$work" && cp "$here"/*.json "$here"/*.mjs "$here"/*.py "$here"/*.sh "$work"/ && cd "$work" || exit 1
fi

fail() { echo "run.sh: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

command -v node >/dev/null || fail "node not found"
if [ ! -d node_modules/openai ]; then
  if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund >&2 || fail "npm ci failed"
  else
    npm install --no-audit --no-fund >&2 || fail "npm install failed"
  fi
fi

# The environment runs as a coprocess: its first stdout line is the JSON description;
# closing its stdin tells it to stop everything it started.
coproc ENV { exec python3 env.py; }
env_pid=$ENV_PID
# Keep our own copies of its pipes and close bash's, so that closing env_in is EOF.
exec {env_in}>&"${ENV[1]}" {env_out}<&"${ENV[0]}"
eval "exec ${ENV[1]}>&- ${ENV[0]}<&-"
stop_env() {
  if [ -n "${env_in:-}" ]; then
    exec {env_in}>&-
    env_in=
    # env.py stops the gateway and the stand-in on EOF; give it time, then end it by pid.
    for _ in $(seq 1 300); do kill -0 "$env_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$env_pid" 2>/dev/null
    wait "$env_pid" 2>/dev/null
  fi
}
trap stop_env EXIT

line=
read -r -t 60 line <&"$env_out" || true
[ -n "$line" ] || fail "the environment did not start (see stderr above)"
json_get() { printf '%s' "$line" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
export SLUICE_BASE_URL SLUICE_KEY SLUICE_FAKE_PORT SLUICE_LIMITED_KEY SLUICE_ANT_FAKE_PORT SLUICE_ANT_SECRET
SLUICE_BASE_URL=$(json_get base_url) SLUICE_KEY=$(json_get key) SLUICE_LIMITED_KEY=$(json_get limited_key) SLUICE_FAKE_PORT=$(json_get fake_port) \
  SLUICE_ANT_FAKE_PORT=$(json_get ant_fake_port) SLUICE_ANT_SECRET=$(json_get ant_secret) \
  || fail "bad environment line: $line"
# The whole line too, for what has no variable of its own (db, resp_fake_ports, other_key).
export SLUICE_SDK_ENV=$line
echo "# environment: $SLUICE_BASE_URL (stand-in port $SLUICE_FAKE_PORT, logs $(json_get gw_dir))"

out=$(mktemp)
# node must not hold the coprocess pipes (env.py would then outlive a killed run.sh).
timeout 300 node --test --test-reporter=tap sdk.test.mjs {env_in}>&- {env_out}<&- 2>&1 | tee "$out"
stop_env

pass=$(sed -n 's/^# pass \([0-9][0-9]*\)$/\1/p' "$out" | tail -n 1)
failn=$(sed -n 's/^# fail \([0-9][0-9]*\)$/\1/p' "$out" | tail -n 1)
rm -f "$out"
if [ -z "$pass" ] || [ -z "$failn" ]; then
  echo "run.sh: node's test runner printed no summary" >&2
  echo "${pass:-0} passed, $(( ${failn:-0} + 1 )) failed"
  exit 1
fi
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
