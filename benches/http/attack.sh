#!/usr/bin/env bash
# Forged tokens against honest clients (the origin table at work): honest
# clients with valid tokens (20 000 in turn, the gateway's token cache off,
# so every request is verified), from 251 client addresses, and an attacker sending
# forged tokens from one address of its own, both through X-Forwarded-For
# with the gateway trusting loopback (--trusted-proxy 127.0.0.1). Two wrk
# processes (-t1 each) run side by side, their connections split by the
# attacker's share: 0, 5, 50 and 90 % of CONNECTIONS; then "alone" (the
# attacker only, for the cost of one forged request) and "mixed" (one wrk,
# every client sending 5 % forged tokens; "honest" then counts its valid
# answers, "attacker" its refusals). The gateway and jsonwebtoken
# (aws-lc, benches/http/cpu.sh's peer with --backend aws-lc) in the same
# run, one after the other, on the same tokens, each case on a server
# started for it (no origin record carries over). Printed per case: honest
# and attacker requests/s, the honest p50 / p99 (µs, wrk's), the server's
# CPU µs per request overall, and per honest request: the mix's CPU less
# the attacker's requests at what each cost alone. wrk shares the cores
# with the server, as in cpu.sh.
#
# Usage: bash benches/http/attack.sh [SECONDS per case, default 5] [RUNS, default 1] [CONNECTIONS, default 256]
# GATEWAY=path/to/kms-gateway measures another build. Needs wrk, curl.
set -euo pipefail
gateway=${GATEWAY:-}
case $gateway in '' | /*) ;; *) gateway=$PWD/$gateway ;; esac
cd "$(dirname "$0")/../.."
gateway=${gateway:-target/release/kms-gateway}
seconds=${1:-5}
runs=${2:-1}
connections=${3:-256}
[ "$connections" -ge 20 ] || { echo "attack: CONNECTIONS must be at least 20 (10 % of them honest)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "attack: wrk missing: apt-get install wrk" >&2; exit 1; }
command -v curl >/dev/null || { echo "attack: curl missing: apt-get install curl" >&2; exit 1; }
cargo build --release -p kms-gateway >&2
cargo build --release --example token_bench >&2
bench=target/release/examples/token_bench
work=target/http-attack
rm -rf "$work" && mkdir -p "$work"
# The same 128 keys in every set (fixed seeds): honest, forged, mixed.
"$bench" gen --dir "$work/honest" --keys 128 --tokens 20000 --forged-share 0 2>/dev/null
"$bench" gen --dir "$work/forged" --keys 128 --tokens 5000 --forged-share 1 2>/dev/null
"$bench" gen --dir "$work/mixed" --keys 128 --tokens 20000 --forged-share 0.05 2>/dev/null
cmp -s "$work/honest/jwks.json" "$work/forged/jwks.json" || { echo "attack: key sets differ" >&2; exit 1; }
source benches/http/ticks.sh
source benches/http/server.sh
hz=$(getconf CLK_TCK)
pid=
# The server, and an attacker's wrk if one is still running.
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; kill $(jobs -p) 2>/dev/null || true' EXIT

# Starts SERVER (gateway or jsonwebtoken); sets $pid, $public and, for the
# gateway, $metrics_url and $metrics_auth (else an empty $metrics_url).
start() {
  local log=$work/$1.log
  case $1 in
    gateway)
      "$gateway" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --max-connections-per-ip 65536 \
        --trust-jwks "$work/honest/jwks.json" --token-cache 0 --trusted-proxy 127.0.0.1 \
        >/dev/null 2>"$log" & ;;
    jsonwebtoken)
      "$bench" peer --mode jsonwebtoken --backend aws-lc --listen 127.0.0.1:0 \
        --jwks "$work/honest/jwks.json" >/dev/null 2>"$log" & ;;
  esac
  pid=$!
  await_server "attack: $1" "$pid" "$log"
  if [ "$1" = gateway ]; then
    # The curve backend in use, from kms_build_info on the admin face.
    metrics_url=http://$admin/metrics metrics_auth="Authorization: Bearer $(cat "$secret_file")"
    curl -sf -H "$metrics_auth" "$metrics_url" >"$work/metrics.txt"
    grep -m1 -oE '[{,]curve_backend="[a-z0-9]+"' "$work/metrics.txt" | sed 's/^[{,]/gateway: /'
  else
    metrics_url=
  fi
}

# One wrk: CONNECTIONS TOKENS_DIR CLIENT(empty: 251 honest clients) OUT.
load() {
  TOKENS=$2/tokens.txt KINDS=$2/kinds.txt CLIENT=$3 CLIENTS=251 wrk -t1 -c"$1" -d"${seconds}s" \
    -s benches/http/tokens.lua "http://$public/whoami" >"$4" 2>&1
}

# The gateway's requests set apart, weighted searches and bisections so
# far (zeros for the peer).
counts() {
  [ -n "$metrics_url" ] || { echo 0 0 0; return; }
  curl -sf -H "$metrics_auth" "$metrics_url" | awk '
    $1 ~ /^kms_verify_set_apart_total[{]/ {a += $2}
    $1 ~ /^kms_weighted_searches_total[{]/ {w += $2}
    $1 ~ /^kms_bisections_total/ {b += $2}
    END {print a + 0, w + 0, b + 0}'
}

# Requests answered, from a wrk output file (0 if none).
answered() { awk '/requests in/ {print $1; found = 1} END {if (!found) print 0}' "$1"; }

# One case: NAME ATTACKER_CONNECTIONS; prints its line. Sets $alone_us
# (CPU µs per attacker request) in the "alone" case.
run_case() {
  local name=$1 bad=$2 good=$((connections - $2))
  local apart0 weighted0 bisections0 apart weighted bisections
  read -r apart0 weighted0 bisections0 < <(counts)
  ticks "$pid" | sort >"$work/before"
  case $name in
    alone) load "$connections" "$work/forged" 203.0.113.66 "$work/bad.out"; : >"$work/good.out" ;;
    mixed) load "$connections" "$work/mixed" "" "$work/good.out"; : >"$work/bad.out" ;;
    *)
      if [ "$bad" -gt 0 ]; then
        load "$bad" "$work/forged" 203.0.113.66 "$work/bad.out" &
        local attacker=$!
      else
        : >"$work/bad.out"
      fi
      load "$good" "$work/honest" "" "$work/good.out"
      [ "$bad" -gt 0 ] && wait "$attacker"
      ;;
  esac
  ticks "$pid" | sort >"$work/after"
  read -r apart weighted bisections < <(counts)
  local honest forged total cpu
  honest=$(answered "$work/good.out")
  forged=$(answered "$work/bad.out")
  if [ "$name" = mixed ]; then
    # One wrk: its valid answers are the honest requests, its refusals
    # the forged ones.
    honest=$(sed -n 's/^check: .* ok=\([0-9]*\).*/\1/p' "$work/good.out")
    forged=$(sed -n 's/^check: .* unauthorized=\([0-9]*\).*/\1/p' "$work/good.out")
  fi
  total=$((honest + forged))
  [ "$total" -gt 0 ] || { echo "attack: no requests answered in $name" >&2; cat "$work/good.out" "$work/bad.out" >&2; exit 1; }
  cpu=$(join "$work/before" "$work/after" | awk -v hz="$hz" '$1 == "process" {print ($3 - $2) * 1e6 / hz}')
  if [ "$name" = alone ]; then alone_us=$(awk -v c="$cpu" -v n="$total" 'BEGIN {printf "%.2f", c / n}'); fi
  awk -v name="$name" -v server="$server" -v s="$seconds" -v h="$honest" -v f="$forged" -v c="$cpu" \
    -v a="${alone_us:-0}" -v lat="$(grep -h '^latency_us' "$work/good.out" | head -1)" \
    -v checks="$(grep -h '^check:' "$work/good.out" "$work/bad.out" | tr '\n' ' ')" \
    -v kms="set apart $((apart - apart0)), weighted searches $((weighted - weighted0)), bisections $((bisections - bisections0))" 'BEGIN {
      honest_cpu = h > 0 ? (c - f * a) / h : 0
      printf "%s %-6s honest %6.0f/s, attacker %6.0f/s (%4.1f %%); honest %s; CPU µs per request %.2f, per honest request %.2f; %s%s\n",
        server, name, h / s, f / s, 100 * f / (h + f), lat, c / (h + f), honest_cpu, checks, server == "gateway" ? kms : ""
    }'
}

# One case on a server started for it (no origin record carries over).
fresh_case() {
  start "$server"
  run_case "$@"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

for run in $(seq 1 "$runs"); do
  for server in gateway jsonwebtoken; do
    alone_us=0
    fresh_case alone "$connections"
    for share in 0 5 50 90; do
      fresh_case "$share%" $(( (connections * share + 50) / 100 ))
    done
    fresh_case mixed 0
  done
  echo "(run $run)"
done
