#!/usr/bin/env bash
# Where `gateway serve`'s CPU goes per request, by thread: the companion of
# benches/http_tokens.sh for #20's 256-connection targets. Starts the
# gateway as http_tokens.sh does (default workers and pool, a JWK Set of 128
# external Ed25519 keys), drives it with wrk (-t1, the same Lua script and
# 20 000 tokens, 1 % forged) and reads each thread's CPU time from
# /proc/PID/task/*/stat before and after: µs of CPU per answered request
# for the tokio workers, the verify pool (kms-verify-N) and wrk itself,
# with the actor's batch-size figures from the admin face's /metrics.
#
# Usage: bash benches/http_cpu.sh [SECONDS per run, default 5] [RUNS, default 3] [CONNECTIONS, default 256]
# GATEWAY=path/to/gateway measures another build of the gateway (a patched
# one, for the decomposition in docs/PERFORMANCE.md). Needs wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
runs=${2:-3}
connections=${3:-256}
command -v wrk >/dev/null || { echo "http_cpu: wrk missing: apt-get install wrk" >&2; exit 1; }
cargo build --release --example gateway --example token_bench >&2
gateway=${GATEWAY:-target/release/examples/gateway}
work=target/http-cpu
rm -rf "$work" && mkdir -p "$work"
target/release/examples/token_bench gen --dir "$work" --keys 128 --tokens 20000 --forged-share 0.01

"$gateway" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --trust-jwks "$work/jwks.json" \
  >/dev/null 2>"$work/gateway.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  grep -q "public face on http://.* signing key" "$work/gateway.log" && break
  sleep 0.1
done
public=$(grep -oE "public face on http://[0-9.:]+" "$work/gateway.log" | head -1 | sed -E 's/.*http:\/\///')
admin=$(grep -oE "admin face on http://[0-9.:]+" "$work/gateway.log" | head -1 | sed -E 's/.*http:\/\///')
[ -n "$public" ] && [ -n "$admin" ] || { cat "$work/gateway.log" >&2; exit 1; }

# CPU clock ticks (user + system) per thread name, summed over threads.
ticks() {
  for t in /proc/"$pid"/task/*; do
    printf '%s %s\n' "$(tr -d ' ' <"$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
  done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
metric() { curl -s "http://$admin/metrics" | awk -v m="$1" '$1 ~ "^"m"[{]" || $1 == m {s += $2} END {print s + 0}'; }
hz=$(getconf CLK_TCK)
export TOKENS=$work/tokens.txt KINDS=$work/kinds.txt
for run in $(seq 1 "$runs"); do
  ticks >"$work/before"
  batches0=$(metric kms_batch_size_count); batched0=$(metric kms_batch_size_sum)
  out=$( { /usr/bin/time -f "wrk_cpu %U %S" wrk -t1 -c"$connections" -d"${seconds}s" \
    -s benches/http/tokens.lua "http://$public/whoami"; } 2>&1)
  ticks >"$work/after"
  batches=$(( $(metric kms_batch_size_count) - batches0 )); batched=$(( $(metric kms_batch_size_sum) - batched0 ))
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")
  threads=$(join "$work/before" "$work/after" | awk -v r="$requests" -v hz="$hz" '
    {d = ($3 - $2) * 1e6 / hz / r; if (d >= 0.05) printf "%s %.2f, ", $1, d; t += d}
    END {printf "gateway total %.2f", t}')
  wrk_us=$(awk -v r="$requests" '/^wrk_cpu/ {printf "%.2f", ($2 + $3) * 1e6 / r}' <<<"$out")
  mean=$(awk -v s="$batched" -v n="$batches" 'BEGIN {printf "%.1f", n ? s / n : 0}')
  echo "c=$connections run $run: $rps req/s; CPU µs per request: $threads; wrk $wrk_us; batches $batches, mean size $mean ($batched of $requests requests batched)"
done
