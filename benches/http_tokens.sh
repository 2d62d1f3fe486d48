#!/usr/bin/env bash
# The HTTP token benchmark of #20: `gateway serve` as a user starts it
# (default workers and pool), trusting a JWK Set of 128 external Ed25519
# keys, driven by wrk (-t1, a Lua script rotating through 20 000 tokens
# under those keys, 1 % forged), beside two axum peers on 2 tokio workers
# with the keys decoded once at start: a per-request jsonwebtoken::decode
# handler, and a floor handler that parses the token, looks up its kid and
# checks exp but verifies no signature. Each server's every answer is
# checked: a 200 must be a valid token's, anything but 200 and 401 (a 503
# included) is wrong, wrk's socket errors or timeouts fail the run, and the
# 401s must match the forged tokens sent to within the requests in flight
# at the end (answers are counted, not matched one by one).
#
# Usage: bash benches/http_tokens.sh [SECONDS per run, default 5] [RUNS, default 5]
# Prints one line per run and connection count, then medians and ratios.
# Needs wrk (apt-get install wrk). Results: docs/PERFORMANCE.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
runs=${2:-5}
command -v wrk >/dev/null || { echo "http_tokens: wrk missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -p kms-gateway >&2
cargo build --release --example token_bench >&2
bin=target/release/examples
work=target/http-bench
rm -rf "$work" && mkdir -p "$work"
"$bin/token_bench" gen --dir "$work" --keys 128 --tokens 20000 --forged-share 0.01

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# The address a server logged (it logs "... on http://ADDR" once serving).
address() {
  local log=$1
  for _ in $(seq 1 300); do
    # Whole lines only: the gateway's ends with its signing key, a peer's
    # with "(ready)".
    if grep -qE "(public face on http://.* signing key|listening on http://.* \(ready\))" "$log"; then
      grep -m1 -oE "(public face on|listening on) http://[0-9.:]+" "$log" | sed -E 's/.*http:\/\///'
      return
    fi
    sleep 0.1
  done
  cat "$log" >&2; exit 1
}
target/release/kms-gateway serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --trust-jwks "$work/jwks.json" \
  >/dev/null 2>"$work/gateway.log" &
pids+=($!)
"$bin/token_bench" peer --mode jsonwebtoken --listen 127.0.0.1:0 --jwks "$work/jwks.json" \
  >/dev/null 2>"$work/jwt.log" &
pids+=($!)
"$bin/token_bench" peer --mode floor --listen 127.0.0.1:0 --jwks "$work/jwks.json" \
  >/dev/null 2>"$work/floor.log" &
pids+=($!)
gateway=$(address "$work/gateway.log")
jwt=$(address "$work/jwt.log")
floor=$(address "$work/floor.log")
echo "gateway $gateway, jsonwebtoken $jwt, floor $floor; ${seconds}s per run, $runs runs" >&2

export TOKENS=$work/tokens.txt KINDS=$work/kinds.txt
results=$work/results.tsv
: >"$results"
for c in 1 16 256; do
  for run in $(seq 1 "$runs"); do
    for name in gateway jsonwebtoken floor; do
      case $name in gateway) addr=$gateway ;; jsonwebtoken) addr=$jwt ;; floor) addr=$floor ;; esac
      out=$(wrk -t1 -c"$c" -d"${seconds}s" --latency -s benches/http/tokens.lua "http://$addr/whoami")
      rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
      p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
      check=$(grep '^check:' <<<"$out")
      socket_errors=$(grep -c '^  Socket errors' <<<"$out" || true)
      # Judged for the gateway and jsonwebtoken (the floor verifies nothing).
      verdict=ok
      if [ "$name" != floor ]; then
        read -r forged okc unauth other wrong < <(sed -E 's/[a-z_]+=//g; s/check: //' <<<"$check")
        if [ "$other" != 0 ] || [ "$wrong" != 0 ] || [ "$okc" = 0 ] || [ "$socket_errors" != 0 ] \
          || [ "$unauth" -gt "$forged" ] || [ $((forged - unauth)) -gt "$c" ]; then
          verdict=WRONG
        fi
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$run" "$name" "$rps" "$p50" "$verdict" >>"$results"
      echo "c=$c run=$run $name: $rps req/s, p50 $p50, $check, $verdict" >&2
    done
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
def ms(t):
    return float(t[:-2]) if t.endswith("ms") else float(t[:-2]) / 1000 if t.endswith("us") else float(t[:-1]) * 1000
wrong = [r for r in rows if r[5] != "ok"]
print("http_tokens: wrong answers in", len(wrong), "runs" if wrong else "no run")
for c in ("1", "16", "256"):
    by = {n: [r for r in rows if r[0] == c and r[2] == n] for n in ("gateway", "jsonwebtoken", "floor")}
    runs = sorted({r[1] for r in by["gateway"]}, key=int)
    rj = [float(by["gateway"][i][3]) / float(by["jsonwebtoken"][i][3]) for i in range(len(runs))]
    rf = [float(by["gateway"][i][3]) / float(by["floor"][i][3]) for i in range(len(runs))]
    lp = [ms(by["gateway"][i][4]) / ms(by["jsonwebtoken"][i][4]) for i in range(len(runs))]
    med = lambda n, k: statistics.median(float(r[k]) if k == 3 else ms(r[k]) for r in by[n])
    print(f"c={c}: req/s median gateway {med('gateway',3):.0f}, jsonwebtoken {med('jsonwebtoken',3):.0f}, floor {med('floor',3):.0f}; "
          f"gateway/jsonwebtoken {statistics.median(rj):.2f} ({min(rj):.2f}-{max(rj):.2f}), "
          f"gateway/floor {statistics.median(rf):.2f} ({min(rf):.2f}-{max(rf):.2f}); "
          f"p50 ms gateway {med('gateway',4):.2f}, jsonwebtoken {med('jsonwebtoken',4):.2f}, ratio {statistics.median(lp):.2f} ({min(lp):.2f}-{max(lp):.2f})")
sys.exit(1 if wrong else 0)
PY
