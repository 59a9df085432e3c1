#!/usr/bin/env bash
# Benchmark (not a test): `rpcmeter serve`'s echo against a grpc-go server (fortio's ping
# server), both loaded by h2load with raw gRPC frames on one connection, in the same run,
# at 8 and 64 streams. `serve` runs three times: with its default flags (what a user runs),
# with --threads set to the cores, and with --spin 0 (defaults otherwise: what the spin
# between echo calls buys, docs/design.md). Prints calls/s and the ratios to grpc-go, each
# the median over rounds with its range; the target is rpcmeter >= 1.5x grpc-go.
# Installs h2load (apt) and fortio (go install) when missing; uses 127.0.0.1 only; stops itself.
#   bench/serve.sh [SECONDS_PER_RUN] [ROUNDS]      defaults: 5 s, 3 rounds (median reported)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-3}

source bench/lib.sh
install_peers
cores=$(nproc)
start_serve
default_addr=$serve_addr default_pid=$serve_pid default_out=$serve_out
start_serve --model async --threads "$cores" --per-thread 64
cores_addr=$serve_addr cores_pid=$serve_pid cores_out=$serve_out
start_serve --spin 0
nospin_addr=$serve_addr nospin_pid=$serve_pid nospin_out=$serve_out
start_fortio

# One gRPC frame: flag 0, big-endian length 4, then a 4-byte protobuf message "hi".
printf '\x00\x00\x00\x00\x04\x0a\x02hi' >"$work/echo.bin" # Message{content = 1: "hi"}
printf '\x00\x00\x00\x00\x04\x1a\x02hi' >"$work/ping.bin" # PingMessage{payload = 3: "hi"}

# h2load reads no trailers, so it counts an UNIMPLEMENTED answer (HTTP 200) as a success:
# check once with a gRPC client that every server really answers OK.
"$rpcmeter" run --plaintext --quiet -n 10 --proto bench/ping.proto --call fgrpc.PingServer/Ping \
    -d '{"payload":"hi"}' "$fortio_addr" >/dev/null
for addr in "$default_addr" "$cores_addr" "$nospin_addr"; do
    "$rpcmeter" run --plaintext --quiet -n 10 --call EchoService/echo -d '{"content":"hi"}' "$addr" >/dev/null
done

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
# "median [min-max]" of the numbers on stdin.
spread() { sort -g | awk -v f="$1" '{ v[NR] = $1 } END { printf "%" f " [%" f "-%" f "]", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
echo_url() { echo "http://$1/EchoService/echo"; }

echo "h2load, 1 connection, ${seconds} s per run (+1 s warm-up), ${rounds} interleaved rounds: median [range]"
echo "serve: default flags; --threads $cores (the cores) --per-thread 64; --spin 0. grpc-go: GOMAXPROCS=$cores"
printf '%-8s %-22s %-22s %-22s %-22s %-18s %-18s %-18s\n' streams grpc-go_calls/s default_calls/s \
    cores_calls/s nospin_calls/s default/grpc-go cores/grpc-go nospin/grpc-go
for streams in 8 64; do
    go_rps=() default_rps=() cores_rps=() nospin_rps=() default_ratio=() cores_ratio=() nospin_ratio=()
    for _ in $(seq "$rounds"); do # interleaved, so drift hits every server alike
        g=$(load "http://$fortio_addr/fgrpc.PingServer/Ping" "$work/ping.bin" "$streams")
        d=$(load "$(echo_url "$default_addr")" "$work/echo.bin" "$streams")
        c=$(load "$(echo_url "$cores_addr")" "$work/echo.bin" "$streams")
        n=$(load "$(echo_url "$nospin_addr")" "$work/echo.bin" "$streams")
        go_rps+=("$g") default_rps+=("$d") cores_rps+=("$c") nospin_rps+=("$n")
        default_ratio+=("$(awk -v a="$d" -v b="$g" 'BEGIN { print a / b }')")
        cores_ratio+=("$(awk -v a="$c" -v b="$g" 'BEGIN { print a / b }')")
        nospin_ratio+=("$(awk -v a="$n" -v b="$g" 'BEGIN { print a / b }')")
    done
    printf '%-8s %-22s %-22s %-22s %-22s %-18s %-18s %-18s\n' "$streams" \
        "$(printf '%s\n' "${go_rps[@]}" | spread .0f)" "$(printf '%s\n' "${default_rps[@]}" | spread .0f)" \
        "$(printf '%s\n' "${cores_rps[@]}" | spread .0f)" "$(printf '%s\n' "${nospin_rps[@]}" | spread .0f)" \
        "$(printf '%s\n' "${default_ratio[@]}" | spread .2f)" "$(printf '%s\n' "${cores_ratio[@]}" | spread .2f)" \
        "$(printf '%s\n' "${nospin_ratio[@]}" | spread .2f)"
done

# Each server's own count must show no refused and no failed call.
for pid in "$default_pid" "$cores_pid" "$nospin_pid"; do kill -INT "$pid"; wait "$pid" || true; done
for out in "$default_out" "$cores_out" "$nospin_out"; do
    grep '^/EchoService/echo' "$out" | awk '{ printf "rpcmeter echo: received %s, ok %s, failed %s, rejected %s\n", $2, $3, $4, $5; if ($4 + $5 > 0) exit 1 }'
done
