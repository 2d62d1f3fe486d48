#!/usr/bin/env bash
# Interoperability against `gateway serve`, with implementations no one here
# wrote: PyJWT (interop/pyjwt_check.py, Ed25519 tokens both ways) and
# Python's `cryptography` 48+ (interop/mldsa_check.py, ML-DSA-65 tokens both
# ways, the gateway run with --alg ML-DSA-65). Needs the release gateway
# built (`cargo build --release -p kms-gateway`), python3 (3.11 or newer for
# cryptography 48's wheels) with venv, and PyPI for PyJWT + cryptography;
# fails with the install hint if any is missing, never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

gateway=target/release/kms-gateway
[ -x "$gateway" ] || { echo "run-pyjwt: $gateway missing: cargo build --release -p kms-gateway" >&2; exit 1; }
command -v python3 >/dev/null || { echo "run-pyjwt: python3 missing: apt-get install python3 python3-venv" >&2; exit 1; }
venv=target/pyjwt-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" || { echo "run-pyjwt: python3 -m venv failed: apt-get install python3-venv" >&2; exit 1; }
fi
"$venv/bin/pip" install -q --disable-pip-version-check "PyJWT>=2.8" "cryptography>=48" \
  || { echo "run-pyjwt: pip install PyJWT cryptography>=48 failed (needs PyPI, and Python 3.11+)" >&2; exit 1; }

work=""
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; [ -z "$work" ] || rm -rf "$work"; }
trap cleanup EXIT

# Runs one check: `checker prepare`, `gateway serve --trust-jwks` of what it
# wrote (and the extra flags), `checker check`, then SIGTERM and exit 0.
round() {
  local checker=$1
  shift
  work=$(mktemp -d)
  "$venv/bin/python" "interop/$checker" prepare "$work"
  "$gateway" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --trust-jwks "$work/jwks.json" "$@" 2>"$work/serve.log" &
  pid=$!
  # The whole line: it ends with the signing key, after both addresses.
  for _ in $(seq 1 300); do
    grep -q "public face on .* signing key" "$work/serve.log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  local line public admin secret
  line=$(grep "public face on .* signing key" "$work/serve.log") || { cat "$work/serve.log" >&2; exit 1; }
  public=$(sed -E 's/.*public face on http:\/\/([^,]+),.*/\1/' <<<"$line")
  admin=$(sed -E 's/.*admin face on http:\/\/([^,]+),.*/\1/' <<<"$line")
  # The admin secret it generated (no --admin-token-file given).
  secret=$(sed -n 's/^gateway serve: admin secret in //p' "$work/serve.log")
  [ -n "$secret" ] || { cat "$work/serve.log" >&2; exit 1; }

  "$venv/bin/python" "interop/$checker" check "$work" "$public" "$admin" "$secret"

  kill -TERM "$pid"
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "run-pyjwt: gateway serve did not stop within 60 s of SIGTERM" >&2
    exit 1
  fi
  wait "$pid" || { echo "run-pyjwt: gateway serve exited non-zero" >&2; exit 1; }
  pid=""
  rm -rf "$work"
  work=""
}

round pyjwt_check.py
echo "run-pyjwt: PyJWT interoperability passed"
round mldsa_check.py --alg ML-DSA-65
echo "run-pyjwt: ML-DSA interoperability (cryptography) passed"
