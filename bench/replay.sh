#!/usr/bin/env bash
# `run --replay` and `replay-info` (docs/replay.md) on generated binary logs (bench/replay_log.py)
# against `rpcmeter serve` on 127.0.0.1, release build:
#   1. a log of $BIG_GB GiB (default 2): replay-info's and run --replay's peak RSS (/usr/bin/time),
#      the log read whole (the scan) and replayed for 5 s; generated in $TMPDIR, deleted after;
#   2. a 60 s log at 100 calls/s: --speed 2 (its wall time and window), and --rps 500 -z 10s
#      (calls sent, drawn from the log as a pool);
#   3. client CPU per call, $ROUNDS (default 3) interleaved rounds of 20 s at 2000 calls/s: a
#      replay of a log of those calls against a plain run (--workload) of the same methods.
# Not a test: numbers for the notes, from a machine shared or not (check `uptime`).
set -euo pipefail
cd "$(dirname "$0")/.."
BIG_GB=${BIG_GB:-2}
ROUNDS=${ROUNDS:-3}
source bench/lib.sh
[[ -x /usr/bin/time ]] || apt_install time
build_rpcmeter

port=$(free_port)
"$rpcmeter" serve --addr "127.0.0.1:$port" >"$work/serve.out" 2>&1 &
pids+=($!)
wait_port "$port"
addr=127.0.0.1:$port
run() { "$rpcmeter" run --plaintext --no-save --no-calibrate -q --format json "$@" "$addr"; }
rss_mib() { awk '/Maximum resident/ { printf "%.1f MiB", $NF / 1024 }' "$1"; }
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

echo "== 1. a ${BIG_GB} GiB log: peak RSS"
# 4 KiB payloads: about 4.2 KiB of log a call.
big=$work/big.binlog
calls=$((BIG_GB * 1024 * 1024 / 42 * 10))
python3 bench/replay_log.py "$big" "$calls" 10000 4096
echo "log: $(du -h "$big" | cut -f1), $calls calls"
/usr/bin/time -v "$rpcmeter" replay-info "$big" >"$work/info.txt" 2>"$work/info.time"
echo "replay-info: $(rss_mib "$work/info.time"), $(awk '/Elapsed/ {print $NF}' "$work/info.time") wall"
/usr/bin/time -v "$rpcmeter" run --plaintext --no-save --no-calibrate -q --format json --replay "$big" -z 5s "$addr" \
  >"$work/big.json" 2>"$work/big.time"
echo "run --replay (the scan, then 5 s of its schedule): $(rss_mib "$work/big.time"), $(field "$work/big.json" "r['requests']['total']") calls sent"
rm -f "$big"

echo "== 2. a 60 s log at 100 calls/s"
log=$work/minute.binlog
python3 bench/replay_log.py "$log" 6000 100 100
start=$(date +%s.%N)
run --replay "$log" --speed 2 >"$work/speed.json"
end=$(date +%s.%N)
echo "--speed 2: $(python3 -c "print(f'{$end - $start:.2f}')") s wall (start-up included), window $(field "$work/speed.json" "round(r['duration_s'], 3)") s, $(field "$work/speed.json" "r['requests']['total']") calls"
run --replay "$log" --rps 500 -z 10s >"$work/rps.json"
echo "--rps 500 -z 10s: $(field "$work/rps.json" "r['requests']['total']") calls sent, unsent $(field "$work/rps.json" "r['requests']['unsent']")"

echo "== 3. client CPU per call, replay vs a plain run of the same methods (2000 calls/s, 20 s)"
python3 bench/replay_log.py "$work/cpu.binlog" 40000 2000 100
cat >"$work/mix.toml" <<EOF
[[call]]
name = "echo"
method = "EchoService/echo"
data = '{"content":"$(printf 'x%.0s' $(seq 100))"}'
weight = 7
[[call]]
name = "put"
method = "rpcmeter.lab.v1.Storage/PutValue"
data = '{"key":"k1","value":"$(printf 'eHh4%.0s' $(seq 33))"}'
weight = 3
EOF
"$rpcmeter" protos "$work/protos" >/dev/null
printf 'import "echo.proto";\nimport "rpcmeter/lab/v1/lab.proto";\n' | sed '1i syntax = "proto3";' >"$work/protos/both.proto"
for round in $(seq "$ROUNDS"); do
  run --replay "$work/cpu.binlog" >"$work/replay.$round.json"
  run --proto "$work/protos/both.proto" -i "$work/protos" --workload "$work/mix.toml" --rps 2000 -z 20s \
    >"$work/plain.$round.json"
  echo "round $round: replay $(field "$work/replay.$round.json" "round(r['client']['cpu_us_per_request'], 2)") µs/call," \
    "plain $(field "$work/plain.$round.json" "round(r['client']['cpu_us_per_request'], 2)") µs/call" \
    "(calls $(field "$work/replay.$round.json" "r['requests']['total']") / $(field "$work/plain.$round.json" "r['requests']['total']"))"
done
