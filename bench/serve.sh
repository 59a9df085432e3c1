#!/usr/bin/env bash
# Benchmark (not a test): `rpcmeter serve`'s echo against a grpc-go server (fortio's ping
# server), both loaded by h2load with raw gRPC frames on one connection, in the same run,
# at 8 and 64 streams. Prints calls/s and the ratio; the target is rpcmeter >= 1.5x grpc-go.
# Installs h2load (apt) and fortio (go install) when missing; uses 127.0.0.1 only; stops itself.
#   bench/serve.sh [SECONDS_PER_RUN] [ROUNDS]      defaults: 5 s, 3 rounds (median reported)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-3}

source bench/lib.sh
install_peers
start_serve
start_fortio
rpc_port=${serve_addr##*:}
go_port=${fortio_addr##*:}

# One gRPC frame: flag 0, big-endian length 4, then a 4-byte protobuf message "hi".
printf '\x00\x00\x00\x00\x04\x0a\x02hi' >"$work/echo.bin" # Message{content = 1: "hi"}
printf '\x00\x00\x00\x00\x04\x1a\x02hi' >"$work/ping.bin" # PingMessage{payload = 3: "hi"}

# h2load reads no trailers, so it counts an UNIMPLEMENTED answer (HTTP 200) as a success:
# check once with a gRPC client that both paths really answer OK.
"$rpcmeter" run --plaintext --quiet -n 10 --proto bench/ping.proto --call fgrpc.PingServer/Ping \
    -d '{"payload":"hi"}' "127.0.0.1:$go_port" >/dev/null
"$rpcmeter" run --plaintext --quiet -n 10 --call EchoService/echo -d '{"content":"hi"}' "127.0.0.1:$rpc_port" >/dev/null

# calls/s of one h2load run; fails unless every request succeeded.
load() { # URL BODY STREAMS
    local out
    out=$(h2load -D "$seconds" --warm-up-time 1 -c 1 -m "$3" -d "$2" \
        -H 'content-type: application/grpc' -H 'te: trailers' "$1")
    local line
    line=$(grep '^requests:' <<<"$out")
    # "requests: N total, N started, N done, N succeeded, 0 failed, 0 errored, 0 timeout"
    if ! grep -q ' 0 failed, 0 errored' <<<"$line"; then echo "h2load failed: $line" >&2; exit 1; fi
    sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "h2load, 1 connection, ${seconds} s per run (+1 s warm-up), median of ${rounds} rounds, 2 server threads each"
printf '%-8s %16s %16s %8s\n' streams rpcmeter_calls/s grpc-go_calls/s ratio
for streams in 8 64; do
    rpc=() go=()
    for _ in $(seq "$rounds"); do # interleaved, so drift hits both sides alike
        rpc+=("$(load "http://127.0.0.1:$rpc_port/EchoService/echo" "$work/echo.bin" "$streams")")
        go+=("$(load "http://127.0.0.1:$go_port/fgrpc.PingServer/Ping" "$work/ping.bin" "$streams")")
    done
    r=$(printf '%s\n' "${rpc[@]}" | median)
    g=$(printf '%s\n' "${go[@]}" | median)
    printf '%-8s %16.0f %16.0f %7.2fx\n' "$streams" "$r" "$g" "$(awk -v r="$r" -v g="$g" 'BEGIN { print r / g }')"
done

# The server's own count must show no refused and no failed call.
kill -INT "$serve_pid"
wait "$serve_pid" || true
grep '^/EchoService/echo' "$work/serve.out" | awk '{ printf "rpcmeter echo: received %s, ok %s, failed %s, rejected %s\n", $2, $3, $4, $5; if ($4 + $5 > 0) exit 1 }'
