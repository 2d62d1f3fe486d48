#!/usr/bin/env bash
# Where a token server's CPU goes per request, by thread: the companion of
# benches/http/tokens.sh for its 256-connection targets. Starts one server
# as that script does (`gateway serve` with default workers and pool, or
# one of its two peers), trusting a JWK Set of 128 external Ed25519 keys,
# drives it with wrk (-t1, the same Lua script and 20 000 tokens, 1 %
# forged) and reads the CPU time of the server (the whole process, and
# each thread by name) and of wrk before and after: µs of CPU per
# answered request. For the gateway it also reads the actor's figures
# from the admin face's /metrics: requests verified on their caller's task
# (the caller path and combining), batches, batches of one, and the mean
# size of the others; then each dispatch path's items and mean batch size
# (`kms_dispatch_items_total` and `kms_dispatch_total` by `reason`).
#
# Usage: bash benches/http/cpu.sh [SECONDS per run, default 5] [RUNS, default 3] [CONNECTIONS, default 256]
# SERVER=gateway (default), jsonwebtoken or floor chooses the server;
# GATEWAY_FLAGS= adds flags to the gateway's (default --token-cache 0);
# SERVER_CPUS= and WRK_CPUS= pin the server and wrk with taskset (e.g.
# SERVER_CPUS=0 WRK_CPUS=1: wrk on a CPU of its own; a gateway on one CPU
# runs one tokio worker and one pool thread);
# GATEWAY=path/to/kms-gateway measures another build of the gateway (for
# instance one with benches/http/no-crypto.patch or no-kms.patch applied,
# the decomposition in docs/PERFORMANCE.md). Needs wrk, curl and GNU time.
set -euo pipefail
# A relative GATEWAY= is relative to where the script was started.
gateway=${GATEWAY:-}
case $gateway in '' | /*) ;; *) gateway=$PWD/$gateway ;; esac
cd "$(dirname "$0")/../.."
gateway=${gateway:-target/release/kms-gateway}
seconds=${1:-5}
runs=${2:-3}
connections=${3:-256}
server=${SERVER:-gateway}
# The 20 000 tokens repeat within a run, so the gateway's verified-token
# cache is off unless GATEWAY_FLAGS says otherwise: this measures
# verification (the "every token unique, cache off" target).
gateway_flags=${GATEWAY_FLAGS:---token-cache 0}
command -v wrk >/dev/null || { echo "http_cpu: wrk missing: apt-get install wrk" >&2; exit 1; }
command -v curl >/dev/null || { echo "http_cpu: curl missing: apt-get install curl" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "http_cpu: /usr/bin/time missing: apt-get install time" >&2; exit 1; }
cargo build --release -p kms-gateway >&2
cargo build --release --example token_bench >&2
work=target/http-cpu
rm -rf "$work" && mkdir -p "$work"
target/release/examples/token_bench gen --dir "$work" --keys 128 --tokens 20000 --forged-share 0.01

case $server in
  gateway)
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$gateway" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --max-connections-per-ip 65536 \
      --trust-jwks "$work/jwks.json" $gateway_flags >/dev/null 2>"$work/server.log" & ;;
  jsonwebtoken | floor)
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} target/release/examples/token_bench peer --mode "$server" --backend aws-lc --listen 127.0.0.1:0 \
      --jwks "$work/jwks.json" >/dev/null 2>"$work/server.log" & ;;
  *) echo "http_cpu: SERVER must be gateway, jsonwebtoken or floor" >&2; exit 2 ;;
esac
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
source benches/http/server.sh
await_server "http_cpu: $server" "$pid" "$work/server.log"

# CPU clock ticks of the server, whole and by thread: ticks PID.
source benches/http/ticks.sh
# From one read of the gateway's /metrics (zeros for a peer): verify
# answers, requests batched, batches, batches of one; each the sum of the
# series whose name and labels match.
actor() {
  [ -n "$admin" ] || { echo 0 0 0 0; return; }
  curl -sf -H "Authorization: Bearer $(cat "$secret_file")" "http://$admin/metrics" | awk '
    $1 ~ /^kms_ops_total[{].*op="verify"/ {v += $2}
    $1 ~ /^kms_batch_size_sum([{]|$)/ {s += $2}
    $1 ~ /^kms_batch_size_count([{]|$)/ {n += $2}
    $1 ~ /^kms_batch_size_bucket[{].*le="1"[}]/ {o += $2}
    END {print v + 0, s + 0, n + 0, o + 0}'
}
# Verify dispatches and their items by path (`reason`), from one read of
# /metrics: lines `reason dispatches items`.
dispatches() {
  [ -n "$admin" ] || return 0
  curl -sf -H "Authorization: Bearer $(cat "$secret_file")" "http://$admin/metrics" | awk '
    $1 ~ /^kms_dispatch_(items_)?total[{]/ {
      match($1, /reason="[a-z_]+"/); r = substr($1, RSTART + 8, RLENGTH - 9)
      if ($1 ~ /^kms_dispatch_items_total/) i[r] += $2; else d[r] += $2
    }
    END {for (r in d) print r, d[r] + 0, i[r] + 0}' | sort
}
hz=$(getconf CLK_TCK)
export TOKENS=$work/tokens.txt KINDS=$work/kinds.txt
for run in $(seq 1 "$runs"); do
  read -r ops0 batched0 batches0 ones0 < <(actor)
  dispatches >"$work/dispatch.before"
  ticks "$pid" | sort >"$work/before"
  out=$( { ${WRK_CPUS:+taskset -c "$WRK_CPUS"} /usr/bin/time -f "wrk_cpu %U %S" wrk -t1 -c"$connections" -d"${seconds}s" \
    -s benches/http/tokens.lua "http://$public/whoami"; } 2>&1) || { printf '%s\n' "$out" >&2; exit 1; }
  ticks "$pid" | sort >"$work/after"
  read -r ops batched batches ones < <(actor)
  dispatches >"$work/dispatch.after"
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  [ "${requests:-0}" -gt 0 ] || { printf 'http_cpu: no requests answered\n%s\n' "$out" >&2; exit 1; }
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")
  cpu=$(join "$work/before" "$work/after" | awk -v r="$requests" -v hz="$hz" '
    $1 == "process" {total = ($3 - $2) * 1e6 / hz / r; next}
    {d = ($3 - $2) * 1e6 / hz / r; if (d >= 0.05) printf "%s %.2f, ", $1, d}
    END {printf "process total %.2f", total}')
  wrk_us=$(awk -v r="$requests" '/^wrk_cpu/ {printf "%.2f", ($2 + $3) * 1e6 / r}' <<<"$out")
  line="c=$connections $server run $run: $rps req/s; CPU µs per request: $cpu; wrk $wrk_us"
  if [ -n "$admin" ]; then
    verifies=$(awk -v a="$ops" -v b="$ops0" 'BEGIN {print a - b}')
    n_batched=$(awk -v a="$batched" -v b="$batched0" 'BEGIN {print a - b}')
    n_batches=$(awk -v a="$batches" -v b="$batches0" 'BEGIN {print a - b}')
    n_ones=$(awk -v a="$ones" -v b="$ones0" 'BEGIN {print a - b}')
    line="$line; actor: $verifies verifies, $((verifies - n_batched)) on the caller's task, $n_batches batches, $n_ones of one, the others $(awk -v s="$n_batched" -v n="$n_batches" -v o="$n_ones" 'BEGIN {printf "%.1f", (n > o ? (s - o) / (n - o) : 0)}') on average"
  fi
  echo "$line"
  if [ -n "$admin" ]; then
    # Items and mean batch size by path, this run only.
    join -a2 "$work/dispatch.before" "$work/dispatch.after" | awk '
      NF == 3 {d = $2; i = $3} NF == 5 {d = $4 - $2; i = $5 - $3}
      d > 0 {printf "%s%s %d items in %d (%.1f each)", sep, $1, i, d, i / d; sep = ", "}
      END {if (sep != "") printf "\n"}' | sed 's/^/  dispatch by path: /'
  fi
  grep '^check:' <<<"$out" || true
done
