#!/usr/bin/env bash
# rpcmeter's call path against its peers, in one run, on this machine (docs/design.md, "The
# call path: measured, not guessed"). Servers: fortio's gRPC ping server (grpc-go) and
# `rpcmeter serve`; clients: h2load, ghz, fortio (ping server only) and `rpcmeter run`, each
# closed loop on ONE connection with C calls in flight, for SECS seconds.
# Prints a table: calls/s, client CPU µs/call (user+sys of the client process), max RSS,
# and rpcmeter's ratios to ghz and h2load.
#
#   bench/run.sh           the table, C in $CONCURRENCY (default "8 64"), $SECS (default 5)
#   bench/run.sh --soak    rpcmeter's RSS at the start and end of a $SOAK_CALLS-call run
#                          (default 10M) against fortio's ping server
#
# Everything listens on and targets 127.0.0.1; servers are killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${SECS:-5}
CONCURRENCY=${CONCURRENCY:-"8 64"}
SOAK_CALLS=${SOAK_CALLS:-10000000}
mode=table
case ${1:-} in
  "") ;;
  --soak) mode=soak ;;
  *) echo "usage: bench/run.sh [--soak]" >&2; exit 2 ;;
esac

source bench/lib.sh
install_peers
[[ $mode != table ]] || install_ghz

# --- servers -------------------------------------------------------------------------------
start_fortio

# Each server: NAME ADDR gRPC-PATH METHOD(for --call) PROTO JSON-REQUEST REQUEST-BYTES(hex)
# The request is the same message in both: one 2-byte string field, "hi".
servers=("fortio $fortio_addr /fgrpc.PingServer/Ping fgrpc.PingServer/Ping bench/ping.proto {\"payload\":\"hi\"} 1a026869")

add_serve() {
  start_serve || { echo "measuring fortio's server only" >&2; return; }
  "$rpcmeter" protos "$work/protos" >/dev/null
  servers+=("rpcmeter-serve $serve_addr /EchoService/echo EchoService/echo $work/protos/echo.proto {\"content\":\"hi\"} 0a026869")
}

# --- soak: RSS of rpcmeter at the start and end of a long run ------------------------------
if [[ $mode == soak ]]; then
  "$rpcmeter" run --plaintext --proto bench/ping.proto --call fgrpc.PingServer/Ping -d '{"payload":"hi"}' \
    -c 8 -n "$SOAK_CALLS" -q --format json "$fortio_addr" >"$work/soak.json" 2>"$work/soak.err" &
  client=$!
  pids+=($client)
  # The first sample after 2 s is "start".
  if ! sample_rss "$work/rss" "$client"; then
    echo "soak: still running after an hour, stopped" >&2
    exit 1
  fi
  wait "$client" || { echo "soak: rpcmeter run failed: $(tail -n 3 "$work/soak.err")" >&2; exit 1; }
  python3 - "$work/rss" "$work/soak.json" <<'PY'
import json, sys
rss = [int(line) for line in open(sys.argv[1]) if line.strip()]
result = json.load(open(sys.argv[2]))
start, end = rss[min(2, len(rss) - 1)], rss[-1]
print(f"soak: {result['requests']['total']} calls ({result['requests']['ok']} ok) "
      f"in {result['duration_s']:.0f} s, {result['throughput_rps']:.0f} calls/s, "
      f"{result['client']['cpu_us_per_request']:.2f} µs CPU/call")
print(f"rpcmeter RSS: start {start / 1024:.1f} MB, end {end / 1024:.1f} MB, "
      f"max {max(rss) / 1024:.1f} MB, growth {(end - start) / 1024:+.1f} MB over {len(rss)} samples")
PY
  exit 0
fi

# --- table ---------------------------------------------------------------------------------
add_serve
results=$work/results.tsv
: >"$results"

for entry in "${servers[@]}"; do
  read -r server addr path method proto json hex <<<"$entry"
  python3 -c "import sys; m = bytes.fromhex('$hex'); sys.stdout.buffer.write(b'\0' + len(m).to_bytes(4, 'big') + m)" \
    >"$work/$server.body"
  for c in $CONCURRENCY; do
    echo "measuring $server, c=$c, ${SECS}s per client ..." >&2
    measure "$server $c" h2load h2load -c 1 -m "$c" -D "$SECS" -d "$work/$server.body" \
      -H 'content-type: application/grpc' -H 'te: trailers' "http://$addr$path"
    measure "$server $c" ghz ghz --insecure --proto "$proto" --call "${method/\//.}" -d "$json" \
      -c "$c" --connections 1 -z "${SECS}s" -O json "$addr"
    if [[ $server == fortio ]]; then
      measure "$server $c" fortio fortio load -grpc -ping -payload hi -c 1 -s "$c" -qps 0 -t "${SECS}s" \
        -loglevel Warning -json - "$addr"
    fi
    measure "$server $c" rpcmeter "$rpcmeter" run --plaintext --proto "$proto" --call "$method" -d "$json" \
      -c "$c" -z "${SECS}s" -q --format json "$addr"
  done
done

python3 - "$results" "$SECS" <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
print(f"\nclosed loop, 1 connection, {sys.argv[2]} s per client, same run; CPU = user+sys of the client process\n")
print("| server | c | client | calls/s | CPU µs/call | max RSS MB | rpcmeter calls/s ratio | rpcmeter CPU/call ratio |")
print("|---|---|---|---|---|---|---|---|")
table = {(s, c, t): (float(r), float(cpu), int(rss)) for s, c, t, r, cpu, rss in rows}
for (s, c, t), (rate, cpu, rss) in table.items():
    ours = table.get((s, c, "rpcmeter"))
    ratio = f"{ours[0] / rate:.2f}x" if ours and t != "rpcmeter" else ""
    cpu_ratio = f"{ours[1] / cpu:.2f}x" if ours and t != "rpcmeter" else ""
    print(f"| {s} | {c} | {t} | {rate:,.0f} | {cpu:.1f} | {rss / 1024:.0f} | {ratio} | {cpu_ratio} |")
print("\nratios: rpcmeter / that client (calls/s above 1 and CPU below 1 favour rpcmeter)")
PY
