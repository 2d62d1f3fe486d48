#!/usr/bin/env bash
# The HTTP token benchmark: `gateway serve` as a user starts it (default
# workers and pool), trusting a JWK Set of 128 external Ed25519 keys,
# driven by wrk (-t1, a Lua script sending the tokens of a file in turn,
# 1 % forged), beside two axum peers on 2 tokio workers with the keys
# decoded once at start: a per-request jsonwebtoken::decode handler (its
# aws-lc backend), and a floor handler that parses the token, looks up its
# kid and checks exp but verifies no signature.
#
# Two token streams, each measured on every server in the same run:
# * unique: 300 000 tokens, none sent twice within a run (a gateway or
#   jsonwebtoken run that sends more fails as REPEATED; the floor, which
#   keeps nothing per token, may wrap), so no cache can help. Servers: the
#   gateway with its verified-token cache off (--token-cache 0),
#   jsonwebtoken, the floor.
# * reuse: 10 000 tokens sent in turn, so each is presented about 20
#   times over a run at ~40 k requests/s, interleaved with the others, as
#   clients present theirs until they expire. Servers: the gateway with
#   its cache (the default) and without, jsonwebtoken, the floor.
#
# Each server's every answer is checked: a 200 must be a valid token's,
# anything but 200 and 401 (a 503 included) is wrong, wrk's socket errors
# or timeouts fail the run, and the 401s must match the forged tokens sent
# to within the requests in flight at the end (answers are counted, not
# matched one by one).
#
# Usage: bash benches/http/tokens.sh [SECONDS per run, default 5] [RUNS, default 5]
# Prints one line per run, stream, connection count and server, then
# medians and ratios. Needs wrk (apt-get install wrk). Results:
# docs/PERFORMANCE.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-5}
runs=${2:-5}
command -v wrk >/dev/null || { echo "http_tokens: wrk missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -p kms-gateway >&2
cargo build --release --example token_bench >&2
bin=target/release/examples
work=target/http-bench
rm -rf "$work" && mkdir -p "$work"
unique_tokens=300000
# The same keys (token_bench's are fixed), so one JWK Set serves both.
"$bin/token_bench" gen --dir "$work/unique" --keys 128 --tokens "$unique_tokens" --forged-share 0.01
"$bin/token_bench" gen --dir "$work/reuse" --keys 128 --tokens 10000 --forged-share 0.01
cp "$work/reuse/jwks.json" "$work/jwks.json"

# shellcheck source=benches/http/servers.sh
source benches/http/servers.sh
target/release/kms-gateway serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --max-connections-per-ip 65536 --trust-jwks "$work/jwks.json" \
  >/dev/null 2>"$work/gateway.log" &
pids+=($!)
target/release/kms-gateway serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --max-connections-per-ip 65536 --trust-jwks "$work/jwks.json" \
  --token-cache 0 >/dev/null 2>"$work/gateway_nocache.log" &
pids+=($!)
"$bin/token_bench" peer --mode jsonwebtoken --backend aws-lc --listen 127.0.0.1:0 --jwks "$work/jwks.json" \
  >/dev/null 2>"$work/jwt.log" &
pids+=($!)
"$bin/token_bench" peer --mode floor --listen 127.0.0.1:0 --jwks "$work/jwks.json" \
  >/dev/null 2>"$work/floor.log" &
pids+=($!)
gateway=$(address "$work/gateway.log")
gateway_nocache=$(address "$work/gateway_nocache.log")
jwt=$(address "$work/jwt.log")
floor=$(address "$work/floor.log")
echo "gateway $gateway (cache off: $gateway_nocache), jsonwebtoken $jwt, floor $floor; ${seconds}s per run, $runs runs" >&2

results=$work/results.tsv
: >"$results"
for c in 1 16 256; do
  for run in $(seq 1 "$runs"); do
    for stream in unique reuse; do
      export TOKENS=$work/$stream/tokens.txt KINDS=$work/$stream/kinds.txt
      case $stream in
        unique) servers="gateway_nocache jsonwebtoken floor" ;;
        reuse) servers="gateway gateway_nocache jsonwebtoken floor" ;;
      esac
      for name in $servers; do
        case $name in
          gateway) addr=$gateway ;; gateway_nocache) addr=$gateway_nocache ;;
          jsonwebtoken) addr=$jwt ;; floor) addr=$floor ;;
        esac
        out=$(wrk -t1 -c"$c" -d"${seconds}s" --latency -s benches/http/tokens.lua "http://$addr/whoami")
        rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
        sent=$(awk '/requests in/ {print $1}' <<<"$out")
        p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
        check=$(grep '^check:' <<<"$out")
        socket_errors=$(grep -c '^  Socket errors' <<<"$out" || true)
        # Judged for the gateways and jsonwebtoken (the floor verifies nothing).
        verdict=ok
        if [ "$name" != floor ]; then
          read -r forged okc unauth other wrong < <(sed -E 's/[a-z_]+=//g; s/check: //' <<<"$check")
          if [ "$other" != 0 ] || [ "$wrong" != 0 ] || [ "$okc" = 0 ] || [ "$socket_errors" != 0 ] \
            || [ "$unauth" -gt "$forged" ] || [ $((forged - unauth)) -gt "$c" ]; then
            verdict=WRONG
          fi
        fi
        # The floor keeps nothing per token, so only the others' runs must
        # not repeat one.
        if [ "$stream" = unique ] && [ "$name" != floor ] && [ "$sent" -gt "$unique_tokens" ]; then
          verdict=REPEATED
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$run" "$stream" "$name" "$rps" "$p50" "$verdict" >>"$results"
        echo "c=$c run=$run $stream $name: $rps req/s, p50 $p50, $check, $verdict" >&2
      done
    done
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
def ms(t):
    return float(t[:-2]) if t.endswith("ms") else float(t[:-2]) / 1000 if t.endswith("us") else float(t[:-1]) * 1000
wrong = [r for r in rows if r[6] != "ok"]
print("http_tokens: wrong answers or repeated tokens in", len(wrong), "runs" if wrong else "no run")
for stream, gateways in (("unique", ("gateway_nocache",)), ("reuse", ("gateway", "gateway_nocache"))):
    for c in ("1", "16", "256"):
        by = {}
        for n in gateways + ("jsonwebtoken", "floor"):
            by[n] = sorted((r for r in rows if r[0] == c and r[2] == stream and r[3] == n), key=lambda r: int(r[1]))
        med = lambda n, k: statistics.median(float(r[k]) if k == 4 else ms(r[k]) for r in by[n])
        line = [f"{stream} c={c}: req/s median " + ", ".join(f"{n} {med(n, 4):.0f}" for n in by)]
        for g in gateways:
            rj = [float(a[4]) / float(b[4]) for a, b in zip(by[g], by["jsonwebtoken"])]
            rf = [float(a[4]) / float(b[4]) for a, b in zip(by[g], by["floor"])]
            lp = [ms(a[5]) / ms(b[5]) for a, b in zip(by[g], by["jsonwebtoken"])]
            line.append(f"{g}/jsonwebtoken {statistics.median(rj):.2f} ({min(rj):.2f}-{max(rj):.2f}), "
                        f"{g}/floor {statistics.median(rf):.2f} ({min(rf):.2f}-{max(rf):.2f}), "
                        f"p50 {g}/jsonwebtoken {statistics.median(lp):.2f} ({min(lp):.2f}-{max(lp):.2f})")
        print("; ".join(line))
sys.exit(1 if wrong else 0)
PY
