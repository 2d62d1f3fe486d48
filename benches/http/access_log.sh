#!/usr/bin/env bash
# The access log's cost: `gateway serve` with and without `--access-log`
# (stdout to a file), side by side, alternating, on the same tokens:
# wrk (-t1, benches/http/tokens.lua, 20 000 tokens of 128 trusted keys, 1 %
# forged, the verified-token cache on as by default) on /whoami, and the
# server's CPU (the whole process, the log's writer thread included) per
# answered request, read from /proc before and after each run. Prints one
# line per run and the median of each, and the ratio with / without.
#
# Usage: bash benches/http/access_log.sh [SECONDS per run, default 5] [RUNS, default 5] [CONNECTIONS, default 64]
# GATEWAY_FLAGS= adds flags to both gateways (e.g. --token-cache 0: every
# token verified in full). Needs wrk and curl.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-5}
runs=${2:-5}
connections=${3:-64}
command -v wrk >/dev/null || { echo "access_log: wrk missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -p kms-gateway >&2
cargo build --release --example token_bench >&2
work=target/http-access-log
rm -rf "$work" && mkdir -p "$work"
target/release/examples/token_bench gen --dir "$work" --keys 128 --tokens 20000 --forged-share 0.01
source benches/http/server.sh
source benches/http/ticks.sh
hz=$(getconf CLK_TCK)
export TOKENS=$work/tokens.txt KINDS=$work/kinds.txt

# One run: MODE (off or on) and its number; prints µs of server CPU per
# request.
run() {
  local flags=()
  [ "$1" = on ] && flags=(--access-log)
  target/release/kms-gateway serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --max-connections-per-ip 65536 --trust-jwks "$work/jwks.json" ${GATEWAY_FLAGS:-} "${flags[@]}" \
    >"$work/access-$1-$2.log" 2>"$work/server-$1-$2.log" &
  local pid=$!
  await_server "access_log: $1" "$pid" "$work/server-$1-$2.log"
  # Warm: the first second's requests are not counted.
  wrk -t1 -c"$connections" -d1s -s benches/http/tokens.lua "http://$public/whoami" >/dev/null
  local before after out requests
  before=$(ticks "$pid" | awk '$1 == "process" {print $2}')
  out=$(wrk -t1 -c"$connections" -d"${seconds}s" -s benches/http/tokens.lua "http://$public/whoami")
  after=$(ticks "$pid" | awk '$1 == "process" {print $2}')
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  kill "$pid" && wait "$pid" 2>/dev/null || true
  [ "${requests:-0}" -gt 0 ] || { printf 'access_log: no requests answered\n%s\n' "$out" >&2; exit 1; }
  if [ "$1" = on ]; then
    local lines
    lines=$(wc -l <"$work/access-$1-$2.log")
    [ "$lines" -gt "$requests" ] || { echo "access_log: $lines lines for $requests requests" >&2; exit 1; }
  fi
  awk -v a="$after" -v b="$before" -v r="$requests" -v hz="$hz" 'BEGIN {printf "%.2f", (a - b) * 1e6 / hz / r}'
}

off=() on=()
for i in $(seq 1 "$runs"); do
  off+=("$(run off "$i")")
  on+=("$(run on "$i")")
  echo "run $i: CPU µs per request without the access log ${off[-1]}, with it ${on[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
echo "median: without $m_off µs, with $m_on µs per request: $(awk -v a="$m_on" -v b="$m_off" 'BEGIN {printf "%.3f", a / b}') x (spread without ${off[*]}; with ${on[*]})"
