#!/usr/bin/env bash
# The identity-provider token benchmark, at 256 connections, every token
# unique within a run and every verified-token cache off, driven by wrk
# (-t1, benches/http/tokens.lua: the tokens of a file in turn, 1 % forged,
# every answer checked as in benches/http/tokens.sh):
#
# * issuer: EdDSA tokens of 32 keys through `gateway serve --issuer`
#   (keys from a local provider's discovery document and JWK Set,
#   token_bench provider) against `gateway serve --trust-jwks` with the
#   same keys from a file. Target: within 5 %.
# * rs256, es256: RS256 tokens of 4 RSA-2048 keys and ES256 tokens of 4
#   P-256 keys through `gateway serve --trust-jwks` against a per-request
#   jsonwebtoken server (token_bench peer, its aws-lc backend, 2 tokio
#   workers, keys decoded at start) verifying the same tokens. Target:
#   at least 0.9.
# * mldsa65: ML-DSA-65 tokens of 4 keys (`AKP` JWKs, RFC 9964) through
#   `gateway serve --trust-jwks` against a per-request axum server that
#   verifies each with aws-lc-rs (token_bench peer --mode ml-dsa, 2 tokio
#   workers, keys parsed at start). Target: at least 1.0. Its tokens are
#   4.5 KB each: $MLDSA_TOKENS of them (default 60000, about 280 MB; raise
#   it if a run says REPEATED).
#
# The servers of a comparison run in turn within each run (interleaved).
# Usage: bash benches/http/issuer.sh [SECONDS per run, default 5] [RUNS, default 5]
# [COMPARISONS, default "issuer rs256 es256 mldsa65"]
# Prints one line per run and server, then medians, ratios and their
# spread. Needs wrk (apt-get install wrk). Results: docs/PERFORMANCE.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-5}
runs=${2:-5}
comparisons=${3:-issuer rs256 es256 mldsa65}
for comparison in $comparisons; do
  case $comparison in
    issuer | rs256 | es256 | mldsa65) ;;
    *) echo "http_issuer: unknown comparison $comparison (issuer, rs256, es256, mldsa65)" >&2; exit 2 ;;
  esac
done
mldsa_tokens=${MLDSA_TOKENS:-60000}
command -v wrk >/dev/null || { echo "http_issuer: wrk missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -p kms-gateway >&2
cargo build --release --example token_bench >&2
bin=target/release/examples
work=target/http-issuer
rm -rf "$work" && mkdir -p "$work"

# shellcheck source=benches/http/servers.sh
source benches/http/servers.sh
gateway() {
  local log=$1; shift
  target/release/kms-gateway serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --max-connections-per-ip 65536 --token-cache 0 "$@" \
    >/dev/null 2>"$log" &
  pids+=($!)
}

# Only what the chosen comparisons need is made and started.
want() { [[ " $comparisons " == *" $1 "* ]]; }
declare -A tokens=([eddsa]=300000 [rs256]=300000 [es256]=300000 [mldsa65]=$mldsa_tokens)
declare -A addr=()
if want issuer; then
  # EdDSA keys have fixed seeds: the set first (for the provider), then the
  # tokens, whose `iss` is the provider's address.
  "$bin/token_bench" gen --dir "$work/eddsa" --keys 32 --tokens 1 --alg EdDSA
  "$bin/token_bench" provider --listen 127.0.0.1:0 --jwks "$work/eddsa/jwks.json" 2>"$work/provider.log" &
  pids+=($!)
  issuer=http://$(address "$work/provider.log")
  "$bin/token_bench" gen --dir "$work/eddsa" --keys 32 --tokens 300000 --alg EdDSA --iss "$issuer" --forged-share 0.01
  gateway "$work/trust.log" --trust-jwks "$work/eddsa/jwks.json"
  gateway "$work/issuer.log" --issuer "$issuer"
  addr[trust]=$(address "$work/trust.log")
  addr[issuer]=$(address "$work/issuer.log")
fi
for alg in rs256 es256; do
  want $alg || continue
  "$bin/token_bench" gen --dir "$work/$alg" --keys 4 --tokens 300000 --alg "${alg^^}" --forged-share 0.01
  gateway "$work/$alg.log" --trust-jwks "$work/$alg/jwks.json"
  "$bin/token_bench" peer --mode jsonwebtoken --backend aws-lc --listen 127.0.0.1:0 \
    --jwks "$work/$alg/jwks.json" >/dev/null 2>"$work/jwt_$alg.log" &
  pids+=($!)
  addr[gateway_$alg]=$(address "$work/$alg.log")
  addr[jsonwebtoken_$alg]=$(address "$work/jwt_$alg.log")
done
if want mldsa65; then
  "$bin/token_bench" gen --dir "$work/mldsa65" --keys 4 --tokens "$mldsa_tokens" --alg ML-DSA-65 --forged-share 0.01
  gateway "$work/mldsa65.log" --trust-jwks "$work/mldsa65/jwks.json"
  "$bin/token_bench" peer --mode ml-dsa --listen 127.0.0.1:0 \
    --jwks "$work/mldsa65/jwks.json" >/dev/null 2>"$work/peer_mldsa65.log" &
  pids+=($!)
  addr[gateway_mldsa65]=$(address "$work/mldsa65.log")
  addr[aws_lc_mldsa65]=$(address "$work/peer_mldsa65.log")
fi
if want issuer; then
  # The issuer's keys arrive in the background: wait for its first token.
  first=$(head -1 "$work/eddsa/tokens.txt")
  for try in $(seq 1 100); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $first" "http://${addr[issuer]}/whoami")" = 200 ]; then
      break
    fi
    if [ "$try" = 100 ]; then
      echo "http_issuer: the --issuer gateway never verified a token:" >&2
      cat "$work/issuer.log" >&2
      exit 1
    fi
    sleep 0.1
  done
fi
echo "${seconds}s per run, $runs runs, 256 connections: $comparisons" >&2

results=$work/results.tsv
: >"$results"
c=256
for run in $(seq 1 "$runs"); do
  for comparison in $comparisons; do
    case $comparison in
      issuer) stream=eddsa servers="trust issuer" ;;
      rs256) stream=rs256 servers="gateway_rs256 jsonwebtoken_rs256" ;;
      es256) stream=es256 servers="gateway_es256 jsonwebtoken_es256" ;;
      mldsa65) stream=mldsa65 servers="gateway_mldsa65 aws_lc_mldsa65" ;;
    esac
    export TOKENS=$work/$stream/tokens.txt KINDS=$work/$stream/kinds.txt
    for name in $servers; do
      out=$(wrk -t1 -c"$c" -d"${seconds}s" --latency -s benches/http/tokens.lua "http://${addr[$name]}/whoami")
      rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
      sent=$(awk '/requests in/ {print $1}' <<<"$out")
      check=$(grep '^check:' <<<"$out")
      socket_errors=$(grep -c '^  Socket errors' <<<"$out" || true)
      verdict=ok
      read -r forged okc unauth other wrong < <(sed -E 's/[a-z_]+=//g; s/check: //' <<<"$check")
      if [ "$other" != 0 ] || [ "$wrong" != 0 ] || [ "$okc" = 0 ] || [ "$socket_errors" != 0 ] \
        || [ "$unauth" -gt "$forged" ] || [ $((forged - unauth)) -gt "$c" ]; then
        verdict=WRONG
      fi
      if [ "$sent" -gt "${tokens[$stream]}" ]; then
        verdict=REPEATED
      fi
      printf '%s\t%s\t%s\t%s\t%s\n' "$run" "$comparison" "$name" "$rps" "$verdict" >>"$results"
      echo "run=$run $comparison $name: $rps req/s, $check, $verdict" >&2
    done
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
wrong = [r for r in rows if r[4] != "ok"]
print("http_issuer: wrong answers or repeated tokens in", len(wrong), "runs" if wrong else "no run")
for comparison, ours, peer in (("issuer", "issuer", "trust"),
                               ("rs256", "gateway_rs256", "jsonwebtoken_rs256"),
                               ("es256", "gateway_es256", "jsonwebtoken_es256"),
                               ("mldsa65", "gateway_mldsa65", "aws_lc_mldsa65")):
    if not any(r[1] == comparison for r in rows):
        continue
    by = {n: sorted((r for r in rows if r[1] == comparison and r[2] == n), key=lambda r: int(r[0]))
          for n in (ours, peer)}
    ratios = [float(a[3]) / float(b[3]) for a, b in zip(by[ours], by[peer])]
    med = {n: statistics.median(float(r[3]) for r in by[n]) for n in by}
    print(f"{comparison} c=256: req/s median {ours} {med[ours]:.0f}, {peer} {med[peer]:.0f}; "
          f"{ours}/{peer} {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
sys.exit(1 if wrong else 0)
PY
