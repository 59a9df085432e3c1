#!/usr/bin/env bash
# Long-lived bidi streams keep rpcmeter's memory flat: STREAMS streams of `rpcmeter serve`'s
# rpcmeter.lab.v1.Streaming/Echo (ping-pong), MESSAGES messages in all, split evenly over the
# streams; rpcmeter's and the server's RSS sampled every second, printed at start and end.
#
#   bench/stream.sh                        # 10M messages over 8 streams
#   MESSAGES=1000000 STREAMS=4 bench/stream.sh
#   RPCMETER=path/to/rpcmeter bench/stream.sh   # a binary already built (no cargo build)
#
# Everything listens on and targets 127.0.0.1; the server is killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

MESSAGES=${MESSAGES:-10000000}
STREAMS=${STREAMS:-8}
PER_STREAM=$(( (MESSAGES + STREAMS - 1) / STREAMS ))

source bench/lib.sh
rpcmeter=${RPCMETER:-}
[[ -n $rpcmeter ]] || build_rpcmeter
start_serve

"$rpcmeter" run --plaintext --call rpcmeter.lab.v1.Streaming/Echo -d '{"payload":"aGk="}' \
  -c "$STREAMS" -n "$STREAMS" --stream-call-count "$PER_STREAM" \
  -q --no-save --no-calibrate --format json "$serve_addr" >"$work/stream.json" 2>"$work/stream.err" &
client=$!
pids+=($client)
# "KB_client KB_server" per line.
if ! sample_rss "$work/rss" "$client" "$serve_pid"; then
  echo "stream: still running after an hour, stopped (use a smaller MESSAGES)" >&2
  exit 1
fi
wait "$client" || { echo "stream: rpcmeter run failed: $(tail -n 3 "$work/stream.err")" >&2; exit 1; }
python3 - "$work/rss" "$work/stream.json" <<'PY'
import json, sys
rss = [tuple(int(x) for x in line.split()) for line in open(sys.argv[1]) if line.strip()]
r = json.load(open(sys.argv[2]))
m = r["messages"]
rt = m["round_trip_us"]
print(f"stream: {r['requests']['total']} streams ({r['requests']['ok']} ok), {m['sent']} messages sent, "
      f"{m['received']} received in {r['duration_s']:.1f} s: {m['sent_per_s']:.0f} messages/s each way")
print(f"round trip: p50 {rt['p50']:.1f} µs, p99 {rt['p99']:.1f} µs, max {rt['max']:.1f} µs; "
      f"client CPU {r['client']['cpu_s']:.1f} s")
# The first sample after 2 s is "start": connections and the first messages are in.
first = rss[min(2, len(rss) - 1)]
# The allocator moves RSS up and down by a few MB in steps: the medians of the two halves
# show a trend that one end sample may hide or fake.
median = lambda xs: sorted(xs)[len(xs) // 2]
for i, who in enumerate(["rpcmeter", "server"]):
    values = [s[i] for s in rss]
    start, end = first[i], values[-1]
    half = max(1, len(values) // 2)
    print(f"{who} RSS: start {start / 1024:.1f} MB, end {end / 1024:.1f} MB, min {min(values) / 1024:.1f} MB, "
          f"max {max(values) / 1024:.1f} MB, median first half {median(values[:half]) / 1024:.1f} MB, "
          f"second half {median(values[half:] or values) / 1024:.1f} MB, over {len(values)} samples")
PY
