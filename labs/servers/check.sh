#!/usr/bin/env bash
# Smoke checks of the reference servers (labs/servers/README.md): builds all four into a
# temporary directory with their build.sh, starts each on 127.0.0.1 port 0, loads it with
# rpcmeter, reads and resets its Stats, runs Python's and Ruby's Cpu and Db beyond capacity
# in both models, and the Java latch client against the Go server and `rpcmeter serve`.
#   bash labs/servers/check.sh        RPCMETER=/path/to/rpcmeter (default: rpcmeter on PATH,
#                                     else target/release or target/debug of this repository)
# A server whose toolchain is missing (its build.sh exits 3) is skipped, and said so.
# Ends with `N passed, N failed`; exits 1 when a check failed. Uses 127.0.0.1 only.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PROTO_DIR=$repo/proto
rpcmeter=${RPCMETER:-$(command -v rpcmeter || true)}
for candidate in "$repo/target/release/rpcmeter" "$repo/target/debug/rpcmeter"; do
    [[ -n $rpcmeter ]] || { [[ -x $candidate ]] && rpcmeter=$candidate; }
done
if [[ -z $rpcmeter ]]; then echo "no rpcmeter: build it (cargo build --release) or set RPCMETER" >&2; exit 2; fi

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0
pass() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

declare -A server_of client_of
# build NAME: runs NAME/build.sh; keeps its commands in server_of/client_of; status 3 = skipped.
build() {
    local name=$1 started=$SECONDS lines rc
    lines=$(cd "$here/$name" && bash build.sh "$work/$name" 2>"$work/$name.build.log")
    rc=$?
    if [[ $rc -eq 3 ]]; then echo "skipped: $name: $(tail -1 "$work/$name.build.log")"; return 3; fi
    if [[ $rc -ne 0 ]]; then fail "$name: build.sh exited $rc: $(tail -3 "$work/$name.build.log")"; return 1; fi
    server_of[$name]=$(sed -n 's/^server: //p' <<<"$lines")
    client_of[$name]=$(sed -n 's/^client: //p' <<<"$lines")
    if [[ -z ${server_of[$name]} ]]; then fail "$name: build.sh printed no 'server: COMMAND' line: $lines"; return 1; fi
    pass "$name: built in $((SECONDS - started)) s: ${server_of[$name]}"
}

# start NAME CMD...: starts a server on port 0; sets pid and addr from its first line.
start() {
    local name=$1 first=""
    shift
    "$@" >"$work/$name.out" 2>"$work/$name.err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 600); do # the first line within 60 s (a cold JVM on a busy machine)
        first=$(head -1 "$work/$name.out" 2>/dev/null)
        [[ -n $first ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ ! $first =~ ^listening\ on\ 127\.0\.0\.1:[0-9]+$ ]]; then
        fail "$name: first stdout line is not 'listening on 127.0.0.1:PORT': '$first' $(head -3 "$work/$name.err")"
        return 1
    fi
    addr=${first#listening on }
}

# stop NAME: SIGTERM, then the server must exit 0 within 15 s and print its final Stats.
stop() {
    local name=$1 rc
    kill -TERM "$pid"
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then fail "$name: still running 15 s after SIGTERM"; kill -KILL "$pid"; fi
    wait "$pid"
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q '^received [0-9]* calls' "$work/$name.out"; then
        pass "$name: SIGTERM: exit 0 with the final Stats"
    else
        fail "$name: SIGTERM: exit $rc, final Stats: $(tail -1 "$work/$name.out")"
    fi
}

# A field of the JSON result in FILE: json FILE 'python expression over r'.
json() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$1"; }

# echo_check NAME: the brief's closed loop, and the server's own count must agree with it.
echo_check() {
    local name=$1 out=$work/$1.echo.json
    if ! "$rpcmeter" run --plaintext --quiet --no-save --call EchoService/echo -d '{"content":"hi"}' \
        -c 8 -z 3s --format json -o "$out" "$addr" 2>"$work/$name.echo.err"; then
        fail "$name: echo run failed: $(tail -2 "$work/$name.echo.err")"
        return
    fi
    local summary
    summary=$(json "$out" "'%d ok of %d, %.0f calls/s, p50 %.0f us, p99 %.0f us; server counted %s received, %s ok' % (r['requests']['ok'], r['requests']['total'], r['throughput_rps'], r['latency_us']['p50'], r['latency_us']['p99'], (r.get('server') or {}).get('received'), (r.get('server') or {}).get('ok'))")
    if [[ $(json "$out" "r['requests']['ok'] > 0 and r['requests']['ok'] == r['requests']['total'] == (r.get('server') or {}).get('ok') == (r.get('server') or {}).get('received')") == True ]]; then
        pass "$name: echo -c 8 -z 3s: $summary"
    else
        fail "$name: echo -c 8 -z 3s: $summary"
    fi
    if "$rpcmeter" run --plaintext --quiet --no-save --call rpcmeter.lab.v1.Stats/Get -n 1 --format json "$addr" >"$work/$name.stats.json" 2>&1 &&
        [[ $(json "$work/$name.stats.json" "r['requests']['ok']") == 1 ]]; then
        pass "$name: Stats/Get answers"
    else
        fail "$name: Stats/Get: $(tail -2 "$work/$name.stats.json")"
    fi
}

# stats_check NAME METHOD: Get shows METHOD's calls (Stats' own not counted), Reset answers with
# them and zeroes them. Read with the Python build's grpcio and stubs.
stats_check() {
    local result
    if [[ ! -x $work/python/venv/bin/python ]]; then echo "skipped: $1: Stats/Reset check (needs the Python build)"; return; fi
    result=$(PYTHONPATH=$work/python/gen "$work/python/venv/bin/python" -c '
import sys, grpc
from rpcmeter.lab.v1 import lab_pb2, lab_pb2_grpc
addr, method = sys.argv[1], sys.argv[2]
stub = lab_pb2_grpc.StatsStub(grpc.insecure_channel(addr))
def calls(reply):
    return {m.method: m for m in reply.methods}
got = stub.Get(lab_pb2.StatsRequest())
before = calls(got)[method]
assert before.received > 0 and before.ok + before.failed + before.rejected == before.received, got
assert before.messages_in == before.received and before.messages_out == before.ok, got
assert not any("Stats" in m for m in calls(got)), "Stats counted its own calls"
assert got.received >= before.received and got.last_arrival_unix_s > got.first_arrival_unix_s > 1e9, got
assert got.server_rps > 0 and got.cpu_seconds > 0 and got.rss_bytes > 1 << 20 and got.uptime_s > 0, got
assert got.in_flight == 0, got
taken = stub.Reset(lab_pb2.StatsRequest())
assert calls(taken)[method].received >= before.received, taken
after = stub.Get(lab_pb2.StatsRequest())
assert after.received == 0 and after.first_arrival_unix_s == 0 and after.server_rps == 0, after
assert all(m.received == m.ok == m.failed == m.rejected == 0 for m in after.methods), after
print("%d received, server_rps %.0f, cpu %.2f s, rss %.0f MiB; Reset answered them and zeroed them" % (
    before.received, got.server_rps, got.cpu_seconds, got.rss_bytes / 2**20))
' "$addr" "$2" 2>&1)
    if [[ $? -eq 0 ]]; then pass "$1: Stats Get/Reset: $result"; else fail "$1: Stats Get/Reset: $(tail -3 <<<"$result")"; fi
}

# rmeter_check NAME CALL TASKS EXPECT_REJECTIONS: test_service's load with retries; every call
# accounted; with EXPECT_REJECTIONS, the server must have refused some (beyond capacity).
rmeter_check() {
    local name=$1 call=$2 tasks=$3 expect=$4 out=$work/$1.$3.json summary
    if ! "$rpcmeter" run --plaintext --quiet --no-save --call "rpcmeter.lab.v1.TestService/$call" -c "$tasks" --loop 2 \
        --max-retries 3 --retry-ms 1000 --format json -o "$out" "$addr" 2>"$work/$name.rmeter.err"; then
        fail "$name: $call -c $tasks: run failed: $(tail -2 "$work/$name.rmeter.err")"
        return
    fi
    summary=$(json "$out" "'%s: %d calls, %d ok, %d attempts, RESOURCE_EXHAUSTED attempts %d, %.1f calls/s, p50 %.0f ms, p99 %.0f ms; server rejected %s' % ('$call -c $tasks --loop 2', r['requests']['total'], r['requests']['ok'], r['requests']['attempts'], r['attempt_statuses'].get('RESOURCE_EXHAUSTED', 0), r['throughput_rps'], r['latency_us']['p50'] / 1e3, r['latency_us']['p99'] / 1e3, (r.get('server') or {}).get('rejected'))")
    local good
    good=$(json "$out" "r['requests']['total'] == 2 * $tasks and r['requests']['ok'] > 0 and (r.get('server') or {}).get('rejected') == r['attempt_statuses'].get('RESOURCE_EXHAUSTED', 0) and (not $expect or r['attempt_statuses'].get('RESOURCE_EXHAUSTED', 0) > 0)")
    if [[ $good == True ]]; then pass "$name: $summary"; else fail "$name: $summary"; fi
}

# latch_check NAME: the Java latch client's rounds against $addr, every call answered OK.
latch_check() {
    local name=$1 out=$work/latch.$1.out
    if [[ -z ${client_of[java]:-} ]]; then echo "skipped: latch client against $name (no Java build)"; return; fi
    if ${client_of[java]} --target "$addr" --calls 10000 --rounds 3 --pause 0 >"$out" 2>"$out.err" &&
        [[ $(grep -cE '^round [1-3]: Took: [0-9.]+ ms  RPS: [0-9.]+  failed: 0$' "$out") == 3 ]]; then
        pass "latch client -> $name: $(sed 's/Took: //; s/  RPS: / ms, /; s/ ms ms/ ms/' "$out" | tr '\n' ';' | sed 's/;$//')"
    else
        fail "latch client -> $name: $(cat "$out" "$out.err" | tail -3)"
    fi
}

echo "rpcmeter: $rpcmeter; work: $work"
for name in python go java ruby; do build "$name"; done

# Commands are word-split on purpose: build.sh prints them as a shell would read them.
for name in go java; do
    [[ -n ${server_of[$name]:-} ]] || continue
    start "$name" ${server_of[$name]} --port 0 || continue
    echo_check "$name"
    stats_check "$name" /EchoService/echo
    [[ $name == go ]] && latch_check go
    stop "$name"
done

if [[ -n ${server_of[python]:-} ]]; then
    # async (the default): capacity 5 x 5 = 25 calls
    if start python-async ${server_of[python]} --port 0 --model async; then
        echo_check python-async
        stats_check python-async /EchoService/echo
        rmeter_check python-async Cpu 20 False
        rmeter_check python-async Db 40 True
        stop python-async
    fi
    # threaded: capacity 5 calls, so -c 20 is beyond it
    if start python-threaded ${server_of[python]} --port 0 --model threaded; then
        rmeter_check python-threaded Cpu 20 True
        rmeter_check python-threaded Db 20 True
        stats_check python-threaded /rpcmeter.lab.v1.TestService/Db
        stop python-threaded
    fi
fi

if [[ -n ${server_of[ruby]:-} ]]; then
    # async: capacity 5 threads x 5 tasks = 25 calls
    if start ruby-async ${server_of[ruby]} --port 0 --async --fib 24; then
        echo_check ruby-async
        stats_check ruby-async /EchoService/echo
        rmeter_check ruby-async Cpu 20 False
        rmeter_check ruby-async Db 40 True
        stop ruby-async
    fi
    # threaded: capacity 5 calls, so -c 20 is beyond it
    if start ruby-threaded ${server_of[ruby]} --port 0 --model threaded --fib 24; then
        rmeter_check ruby-threaded Cpu 20 True
        rmeter_check ruby-threaded Db 20 True
        stats_check ruby-threaded /rpcmeter.lab.v1.TestService/Db
        stop ruby-threaded
    fi
fi

# The latch client against the Rust lab server.
if start rpcmeter-serve "$rpcmeter" serve --addr 127.0.0.1:0; then
    latch_check "rpcmeter serve"
    kill -TERM "$pid"; wait "$pid"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
