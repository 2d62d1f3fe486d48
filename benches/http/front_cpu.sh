#!/usr/bin/env bash
# The gateway in front of services: three comparisons at CONNECTIONS
# keep-alive connections (default 256), each side by side in the same run,
# alternating, on the tokens of benches/http/tokens.sh (128 external
# Ed25519 keys, 20 000 tokens, 1 % forged; every answer checked by
# benches/http/tokens.lua):
#
# 1. forward-auth: wrk against NGINX, which asks the auth server
#    (auth_request, upstream keep-alive) and answers `return 200` itself
#    with the subject the auth server sent; the auth server is
#    `kms-gateway serve` (/auth, --claim-header sub=X-Auth-Subject) or the
#    per-request jsonwebtoken peer (token_bench with the aws-lc backend,
#    /auth the same way).
#    Figure: the auth server's CPU µs per request (as benches/http/cpu.sh
#    measures it); target gateway ≤ 0.75 × jsonwebtoken. The gateway is
#    measured with its verified-token cache on (its default; the 20 000
#    tokens repeat within a run, as real clients' do) and off, and with a
#    file of 100 access rules (--access-rules: 99 rules on other paths,
#    each asking a scope and a claim, then the one that matches, last),
#    NGINX passing X-Original-URI and X-Original-Method as RUNBOOK's
#    configuration does; target rules ≤ 1.05 × none.
# 2. proxy: wrk against the gateway's proxy mode (--upstream, an NGINX
#    that echoes X-Auth-Subject) beside wrk against the same gateway's
#    /whoami; the gateway's CPU µs per request (the upstream's left out);
#    target proxy ≤ 1.25 × /whoami. Measured twice: with the gateway's
#    verified-token cache on (its default; most of these tokens repeat,
#    so /whoami is mostly a cache hit) and off (--token-cache 0: every
#    request verifies its signature). Beside them, the peer: NGINX's own
#    CPU µs per request answering `return 200` itself and proxying to the
#    same upstream with `proxy_pass` (what one more HTTP exchange costs a
#    proxy written in C on the same cores).
# 3. tls: wrk against /whoami of a gateway with --tls-cert (a P-256
#    certificate made with openssl) beside the same gateway's flags without
#    it, wrk (one thread) pinned to one CPU and both gateways to another
#    (taskset; a gateway on one CPU runs one tokio worker), so that the
#    gateway, not wrk's own TLS, sets the rate: one core each; requests/s;
#    target TLS ≥ 0.85 × plain. Each gateway of the pair is warmed up
#    (one short wrk run) first.
#
# Every line also gives wrk's own CPU µs per request (user + system, as
# the servers'): but for the TLS pair, wrk and the servers share the
# cores, so what the client spends per request bounds the requests/s of
# both sides.
#
# Usage: bash benches/http/front_cpu.sh [SECONDS per run, default 5] [RUNS, default 5] [CONNECTIONS, default 256]
# Prints one line per run and server, then each comparison's median ratio.
# Needs wrk, nginx, openssl, taskset, GNU time (Debian's wrk, nginx,
# openssl, util-linux, time) and 2 CPUs. Results:
# docs/PERFORMANCE.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-5}
runs=${2:-5}
connections=${3:-256}
for tool in wrk:wrk nginx:nginx openssl:openssl taskset:util-linux; do
  command -v "${tool%%:*}" >/dev/null \
    || { echo "front_cpu: ${tool%%:*} missing: apt-get install ${tool#*:}" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "front_cpu: /usr/bin/time missing: apt-get install time" >&2; exit 1; }
cargo build --release -p kms-gateway >&2
cargo build --release --example token_bench >&2
work=$PWD/target/front-cpu
rm -rf "$work" && mkdir -p "$work/empty"
target/release/examples/token_bench gen --dir "$work" --keys 128 --tokens 20000 --forged-share 0.01
source benches/http/ticks.sh

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# A free loopback port for NGINX (bound and released), below the
# kernel's ephemeral range, so that no outgoing connection of the servers
# or of wrk takes it before NGINX binds it.
port() {
  python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    p = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
else:
    raise SystemExit("front_cpu: no free port below the ephemeral range")
'
}
# wait_for FILE REGEX: until the log says it is ready.
wait_for() {
  for _ in $(seq 1 300); do grep -qE "$2" "$1" && return 0; sleep 0.1; done
  echo "front_cpu: not ready ($2):" >&2; cat "$1" >&2; exit 1
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
  -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
chmod 600 "$work/tls.key"

up=$(port) front_gw=$(port) front_nocache=$(port) front_rules=$(port) front_jwt=$(port) peer_return=$(port) peer_proxy=$(port)
# The TLS pair runs with wrk on one CPU and its two gateways on another:
# sharing the cores, wrk's own TLS work (OpenSSL reads each record's
# header and body with two reads) would set both rates, and the ratio
# would be wrk's. Of the CPUs this script may run on (a container's
# cpuset need not start at 0), wrk's is the first, the TLS pair's the
# second.
read -r wrk_cpu server_cpus _ <<<"$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), "")')"
[ -n "$server_cpus" ] || { echo "front_cpu: the TLS pair needs 2 CPUs" >&2; exit 1; }
# gateway NAME [FLAG...]: a gateway whose log is $work/NAME.log
# ($CPUS, if set: the CPUs it runs on); its pid is ${pids[-1]}.
gateway() {
  local name=$1
  shift
  ${CPUS:+taskset -c "$CPUS"} target/release/kms-gateway serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --max-connections-per-ip 65536 \
    --trust-jwks "$work/jwks.json" --claim-header sub=X-Auth-Subject \
    --upstream "http://127.0.0.1:$up" --forward-auth-path /auth "$@" \
    >/dev/null 2>"$work/$name.log" &
  pids+=($!)
}
# Plain (forward auth, the proxy mode), the same with the cache off, and
# the TLS pair.
gateway plain
gw_pid=${pids[-1]}
gateway cache-off --token-cache 0
nocache_pid=${pids[-1]}
# 100 access rules: the one that matches every path comes last, so each
# check walks all of them.
for i in $(seq 1 99); do
  printf '[[rule]]\npath = "/svc-%s/"\nscopes = ["svc%s:read"]\nclaims = { tenant = "t%s" }\n' "$i" "$i" "$i"
done >"$work/rules.toml"
printf '[[rule]]\npath = "/"\n' >>"$work/rules.toml"
gateway rules --access-rules "$work/rules.toml"
rules_pid=${pids[-1]}
CPUS=$server_cpus gateway tls --tls-cert "$work/tls.crt" --tls-key "$work/tls.key"
tls_pid=${pids[-1]}
CPUS=$server_cpus gateway tls-twin
twin_pid=${pids[-1]}
target/release/examples/token_bench peer --mode jsonwebtoken --backend aws-lc --listen 127.0.0.1:0 \
  --jwks "$work/jwks.json" >/dev/null 2>"$work/peer.log" &
pids+=($!)
jwt_pid=${pids[-1]}
# public NAME SCHEME: the public face's address in $work/NAME.log.
public() {
  wait_for "$work/$1.log" "public face on $2://"
  grep -m1 -oE "public face on $2://[0-9.:]+" "$work/$1.log" | sed -E "s/.*$2:\/\///"
}
gw=$(public plain http)
nocache=$(public cache-off http)
rules=$(public rules http)
tls=$(public tls https)
twin=$(public tls-twin http)
wait_for "$work/peer.log" "listening on http://.* \(ready\)"
jwt=$(grep -m1 -oE "listening on http://[0-9.:]+" "$work/peer.log" | sed -E 's/.*http:\/\///')

# temp_paths DIR: NGINX's temporary directories, under DIR.
temp_paths() {
  for kind in client_body proxy fastcgi uwsgi scgi; do
    echo "    ${kind}_temp_path $1/$kind;"
  done
}
# NGINX: two fronts asking an auth server each, and the proxy mode's
# upstream, which echoes the subject it was given.
front() {
  cat <<CONF
    server {
        listen 127.0.0.1:$1;
        root $work/empty;
        location / {
            auth_request /_auth;
            auth_request_set \$kms_subject \$upstream_http_x_auth_subject;
            try_files /none @ok;
        }
        location = /_auth {
            internal;
            proxy_pass http://$2/auth;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI \$request_uri;
            proxy_set_header X-Original-Method \$request_method;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location @ok {
            default_type application/json;
            return 200 '{"sub":"\$kms_subject"}';
        }
    }
CONF
}
cat >"$work/nginx.conf" <<CONF
$( [ "$(id -u)" = 0 ] && echo "user root root;" )
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
$(temp_paths "$work")
    upstream gateway { server $gw; keepalive 512; }
    upstream gateway_cache_off { server $nocache; keepalive 512; }
    upstream gateway_rules { server $rules; keepalive 512; }
    upstream jsonwebtoken { server $jwt; keepalive 512; }
$(front "$front_gw" gateway)
$(front "$front_nocache" gateway_cache_off)
$(front "$front_rules" gateway_rules)
$(front "$front_jwt" jsonwebtoken)
    server {
        listen 127.0.0.1:$up;
        location / {
            default_type application/json;
            return 200 '{"sub":"\$http_x_auth_subject"}';
        }
    }
}
CONF
nginx -p "$work" -c "$work/nginx.conf" 2>"$work/nginx.log" &
pids+=($!)
# The proxy mode's peer: NGINX itself (a process of its own, so that its
# CPU is its own) answering `return 200` with the subject, and proxying
# to the same upstream with `proxy_pass` (keep-alive, the subject set as
# a header): what one more HTTP exchange per request costs a proxy
# written in C, on the same cores. It verifies no token.
mkdir -p "$work/peer"
cat >"$work/peer/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $work/peer/nginx.pid;
error_log $work/peer/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
$(temp_paths "$work/peer")
    upstream app { server 127.0.0.1:$up; keepalive 512; }
    server {
        listen 127.0.0.1:$peer_return;
        location / {
            default_type application/json;
            return 200 '{"sub":"t-nginx"}';
        }
    }
    server {
        listen 127.0.0.1:$peer_proxy;
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Auth-Subject t-nginx;
        }
    }
}
CONF
nginx -p "$work/peer" -c "$work/peer/nginx.conf" 2>"$work/peer/nginx.log" &
pids+=($!)
peer_pid=${pids[-1]}
# NGINX's ports: each process listens on all of its own or on none.
for listening in "$front_jwt:$work/nginx.log" "$peer_proxy:$work/peer/nginx.log"; do
  for attempt in $(seq 1 101); do
    (exec 3<>"/dev/tcp/127.0.0.1/${listening%%:*}") 2>/dev/null && break
    [ "$attempt" -le 100 ] || { echo "front_cpu: NGINX not listening:" >&2; cat "${listening#*:}" >&2; exit 1; }
    sleep 0.1
  done
done

hz=$(getconf CLK_TCK)
export TOKENS=$work/tokens.txt KINDS=$work/kinds.txt
# measure NAME PID URL: one wrk run ($WRK_CPUS, if set: the CPUs it
# runs on); prints "NAME rps p99_ms cpu_us wrk_cpu_us" (wrk's CPU from GNU
# time, as benches/http/cpu.sh reads it).
measure() {
  local name=$1 pid=$2 url=$3 out requests before after
  before=$(ticks "$pid" | awk '$1 == "process" {print $2}')
  out=$(${WRK_CPUS:+taskset -c "$WRK_CPUS"} /usr/bin/time -f "wrk_cpu %U %S" \
    wrk -t1 -c"$connections" -d"${seconds}s" --latency -s benches/http/tokens.lua "$url" 2>&1) \
    || { printf '%s\n' "$out" >&2; exit 1; }
  after=$(ticks "$pid" | awk '$1 == "process" {print $2}')
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  [ "${requests:-0}" -gt 0 ] || { printf 'front_cpu: %s: no requests answered\n%s\n' "$name" "$out" >&2; exit 1; }
  # Every answer must be right: no wrong 200s, nothing but 200 and 401,
  # no socket errors.
  if grep -q "Socket errors" <<<"$out" || ! grep -qE "check: .* other=0 wrong=0" <<<"$out"; then
    printf 'front_cpu: %s: wrong answers\n%s\n' "$name" "$out" >&2; exit 1
  fi
  awk -v n="$name" -v r="$requests" -v hz="$hz" -v b="$before" -v a="$after" '
    /^Requests\/sec:/ {rps = $2}
    $1 == "99%" {p99 = $2; if (p99 ~ /us$/) p99 = p99 / 1000; else if (p99 ~ /ms$/) p99 += 0; else if (p99 ~ /s$/) p99 = p99 * 1000}
    /^wrk_cpu/ {wrk = ($2 + $3) * 1e6 / r}
    END {printf "%s %.0f %.2f %.2f %.2f\n", n, rps, p99, (a - b) * 1e6 / hz / r, wrk}' <<<"$out"
}
results=$work/results
: >"$results"
# The TLS pair's warm-up: its first run was otherwise up to 15 % off.
for url in "https://$tls" "http://$twin"; do
  taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d1s -s benches/http/tokens.lua "$url/whoami" >/dev/null 2>&1
done
# One line per measurement: name, the server's pid, URL, target path,
# wrk's CPU (- for none). Assigned, not expanded in a word list, so that
# a measurement that fails ends the script (set -e).
measurements="\
forward-auth/gateway $gw_pid http://127.0.0.1:$front_gw /whoami -
forward-auth-rules/gateway $rules_pid http://127.0.0.1:$front_rules /whoami -
forward-auth/jsonwebtoken $jwt_pid http://127.0.0.1:$front_jwt /whoami -
forward-auth-cache-off/gateway $nocache_pid http://127.0.0.1:$front_nocache /whoami -
proxy/gateway $gw_pid http://$gw /app -
proxy/whoami $gw_pid http://$gw /whoami -
proxy-cache-off/gateway $nocache_pid http://$nocache /app -
proxy-cache-off/whoami $nocache_pid http://$nocache /whoami -
proxy-peer/nginx-proxy_pass $peer_pid http://127.0.0.1:$peer_proxy /app -
proxy-peer/nginx-return $peer_pid http://127.0.0.1:$peer_return /app -
tls/https $tls_pid https://$tls /whoami $wrk_cpu
tls/http $twin_pid http://$twin /whoami $wrk_cpu"
for run in $(seq 1 "$runs"); do
  while read -r name pid url target cpus; do
    [ "$cpus" = - ] && cpus=
    line=$(TARGET=$target WRK_CPUS=$cpus measure "$name" "$pid" "$url" </dev/null)
    read -r name rps p99 cpu client_cpu <<<"$line"
    echo "$name $rps $p99 $cpu $client_cpu" >>"$results"
    printf 'c=%s run %s %-30s %8s req/s  p99 %7s ms  server CPU %6s µs/request  wrk CPU %6s µs/request\n' \
      "$connections" "$run" "$name" "$rps" "$p99" "$cpu" "$client_cpu"
  done <<<"$measurements"
done
# Medians and ratios.
median() { awk -v n="$1" -v f="$2" '$1 == n {print $f}' "$results" | sort -g | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# added A B: what A adds over B (µs).
added() { awk -v a="$1" -v b="$2" 'BEGIN {printf "+%.2f", a - b}'; }
# busy NAME: the median share of a core wrk used in NAME's runs.
busy() { awk -v c="$(median "$1" 5)" -v r="$(median "$1" 2)" 'BEGIN {printf "%.2f", c * r / 1e6}'; }
echo "medians over $runs runs at c=$connections:"
echo "  forward auth through NGINX, auth server CPU per request: gateway $(median forward-auth/gateway 4) µs, jsonwebtoken $(median forward-auth/jsonwebtoken 4) µs: $(ratio "$(median forward-auth/gateway 4)" "$(median forward-auth/jsonwebtoken 4)") × (target ≤ 0.75); req/s $(median forward-auth/gateway 2) vs $(median forward-auth/jsonwebtoken 2), p99 $(median forward-auth/gateway 3) vs $(median forward-auth/jsonwebtoken 3) ms"
echo "  the same with 100 access rules: $(median forward-auth-rules/gateway 4) vs $(median forward-auth/gateway 4) µs: $(ratio "$(median forward-auth-rules/gateway 4)" "$(median forward-auth/gateway 4)") × (target ≤ 1.05); req/s $(median forward-auth-rules/gateway 2) vs $(median forward-auth/gateway 2)"
echo "  the same, the gateway's cache off: $(median forward-auth-cache-off/gateway 4) µs: $(ratio "$(median forward-auth-cache-off/gateway 4)" "$(median forward-auth/jsonwebtoken 4)") ×; req/s $(median forward-auth-cache-off/gateway 2)"
echo "  proxy mode vs /whoami, gateway CPU per request: $(median proxy/gateway 4) vs $(median proxy/whoami 4) µs: $(ratio "$(median proxy/gateway 4)" "$(median proxy/whoami 4)") × (target ≤ 1.25); req/s $(median proxy/gateway 2) vs $(median proxy/whoami 2)"
echo "  the peer, NGINX's own CPU per request: proxy_pass $(median proxy-peer/nginx-proxy_pass 4) vs return 200 $(median proxy-peer/nginx-return 4) µs: $(ratio "$(median proxy-peer/nginx-proxy_pass 4)" "$(median proxy-peer/nginx-return 4)") ×; one more exchange: NGINX $(added "$(median proxy-peer/nginx-proxy_pass 4)" "$(median proxy-peer/nginx-return 4)") µs, the gateway $(added "$(median proxy/gateway 4)" "$(median proxy/whoami 4)") µs"
echo "  the same, cache off: $(median proxy-cache-off/gateway 4) vs $(median proxy-cache-off/whoami 4) µs: $(ratio "$(median proxy-cache-off/gateway 4)" "$(median proxy-cache-off/whoami 4)") ×; req/s $(median proxy-cache-off/gateway 2) vs $(median proxy-cache-off/whoami 2)"
echo "  TLS vs plain /whoami (wrk on CPU $wrk_cpu, the gateways on CPU $server_cpus), req/s: $(median tls/https 2) vs $(median tls/http 2): $(ratio "$(median tls/https 2)" "$(median tls/http 2)") × (target ≥ 0.85); gateway CPU $(median tls/https 4) vs $(median tls/http 4) µs, wrk CPU $(median tls/https 5) vs $(median tls/http 5) µs per request; wrk's core busy $(busy tls/https) (TLS), $(busy tls/http) (plain): near 1, wrk set the rate"
