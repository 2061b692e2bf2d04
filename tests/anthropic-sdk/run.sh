#!/bin/bash
# run.sh: the Anthropic TypeScript SDK suite (R-ANT-6/7: POST /v1/messages, count_tokens and
# GET /v1/models seen through `@anthropic-ai/sdk`). Installs the pinned SDKs when node_modules
# is missing, starts the environment (env.py: lighttpd + sluice-fcgi pool, a stand-in speaking
# Anthropic Messages behind route `claude`, one speaking OpenAI behind route `gpt`), runs
# `node --test anthropic.test.mjs` against it, stops the environment, and ends with
# "N passed, N failed". Honours SLUICE_BUILDDIR / SLUICE_SRCDIR / SLUICE_TEST_OUT like the
# end-to-end tests.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
if [ -w "$here" ]; then
  cd "$here" || exit 1
else
  # make distcheck: the source tree is read-only, so npm installs into a copy.
  work="${SLUICE_TEST_OUT:-/tmp}/anthropic-sdk-suite"
  mkdir -p "$work" && cp "$here"/*.json "$here"/*.mjs "$here"/*.py "$here"/*.sh "$work"/ && cd "$work" || exit 1
fi

fail() { echo "run.sh: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

command -v node >/dev/null || fail "node not found"
# The SDK (both lines) supports Node 20 and later; an older node is a failure, never a skip.
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] 2>/dev/null || fail "node $(node --version) is too old: @anthropic-ai/sdk needs Node 20 or later"
if [ ! -f node_modules/@anthropic-ai/sdk/package.json ] || [ ! -f node_modules/anthropic-sdk-0/package.json ]; then
  npm ci --no-audit --no-fund >&2 || fail "npm ci failed"
fi

# The SDK reads credentials, headers and a base URL from ANTHROPIC_* variables and (1.x) from
# profile files in its config folder; the tests pass everything explicitly, so neither may
# leak in from the machine: no ANTHROPIC_* variable, and an empty config folder.
for v in $(compgen -e | grep '^ANTHROPIC_'); do unset "$v"; done
cfg=$(mktemp -d) || fail "mktemp failed"
export ANTHROPIC_CONFIG_DIR=$cfg

# The environment runs as a coprocess: its first stdout line is the JSON description;
# closing its stdin tells it to stop everything it started.
coproc ENV { exec python3 env.py; }
env_pid=$ENV_PID
exec {env_in}>&"${ENV[1]}" {env_out}<&"${ENV[0]}"
eval "exec ${ENV[1]}>&- ${ENV[0]}<&-"
stop_env() {
  if [ -n "${env_in:-}" ]; then
    exec {env_in}>&-
    env_in=
    for _ in $(seq 1 300); do kill -0 "$env_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$env_pid" 2>/dev/null
    wait "$env_pid" 2>/dev/null
  fi
}
trap stop_env EXIT

line=
read -r -t 60 line <&"$env_out" || true
[ -n "$line" ] || fail "the environment did not start (see stderr above)"
export SLUICE_ASDK_ENV=$line
echo "# environment: $(printf '%s' "$line" | python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["base_url"], "logs", e["gw_dir"])')"

out=$(mktemp)
# node must not hold the coprocess pipes (env.py would then outlive a killed run.sh).
timeout 300 node --test --test-reporter=tap anthropic.test.mjs {env_in}>&- {env_out}<&- 2>&1 | tee "$out"
stop_env

pass=$(sed -n 's/^# pass \([0-9][0-9]*\)$/\1/p' "$out" | tail -n 1)
failn=$(sed -n 's/^# fail \([0-9][0-9]*\)$/\1/p' "$out" | tail -n 1)
rm -f "$out"
rm -rf "$cfg"
if [ -z "$pass" ] || [ -z "$failn" ]; then
  echo "run.sh: node's test runner printed no summary" >&2
  echo "${pass:-0} passed, $(( ${failn:-0} + 1 )) failed"
  exit 1
fi
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
