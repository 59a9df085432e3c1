#!/usr/bin/env bash
# `run --replay` and `replay-info` (docs/replay.md) on generated binary logs (bench/replay_log.py)
# against `rpcmeter serve` on 127.0.0.1, release build:
#   1. a log of $BIG_GB GiB (default 2): replay-info's and run --replay's peak RSS (/usr/bin/time),
#      the log read whole (the scan) and replayed for 5 s; generated in $TMPDIR, deleted after;
#   2. a 60 s log at 100 calls/s: --speed 2 (its wall time and window), and --rps 500 -z 10s
#      (calls sent, drawn from the log as a pool);
#   3. client CPU per call, $ROUNDS (default 5) interleaved rounds of $SECONDS_EACH s (20) at
#      $RATE calls/s (2000): a replay of a log of those calls against a plain run (--workload)
#      of the same methods, counted by `perf stat -e instructions:u,task-clock` (user-space
#      instructions, which the machine's load barely moves), min/median/max and their ratio.
# PARTS="1 2 3" (default) chooses the parts; RPCMETER_BIN a built binary instead of building.
# Not a test: numbers for the notes, from a machine shared or not (check `uptime`).
set -euo pipefail
cd "$(dirname "$0")/.."
BIG_GB=${BIG_GB:-2}
ROUNDS=${ROUNDS:-5}
RATE=${RATE:-2000}
SECONDS_EACH=${SECONDS_EACH:-20}
source bench/lib.sh
[[ -x /usr/bin/time ]] || apt_install time
rpcmeter_or_build
PARTS=${PARTS:-1 2 3}
part() { [[ " $PARTS " == *" $1 "* ]]; }

port=$(free_port)
"$rpcmeter" serve --addr "127.0.0.1:$port" >"$work/serve.out" 2>&1 &
pids+=($!)
wait_port "$port"
addr=127.0.0.1:$port
run() { "$rpcmeter" run --plaintext --no-save --no-calibrate -q --format json "$@" "$addr"; }
rss_mib() { awk '/Maximum resident/ { printf "%.1f MiB", $NF / 1024 }' "$1"; }
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

if part 1; then
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

fi
if part 2; then
echo "== 2. a 60 s log at 100 calls/s"
log=$work/minute.binlog
python3 bench/replay_log.py "$log" 6000 100 100
start=$(date +%s.%N)
run --replay "$log" --speed 2 >"$work/speed.json"
end=$(date +%s.%N)
echo "--speed 2: $(python3 -c "print(f'{$end - $start:.2f}')") s wall (start-up included), window $(field "$work/speed.json" "round(r['duration_s'], 3)") s, $(field "$work/speed.json" "r['requests']['total']") calls"
run --replay "$log" --rps 500 -z 10s >"$work/rps.json"
echo "--rps 500 -z 10s: $(field "$work/rps.json" "r['requests']['total']") calls sent, unsent $(field "$work/rps.json" "r['requests']['unsent']")"

fi
if part 3; then
echo "== 3. client CPU per call, replay vs a plain run of the same methods ($RATE calls/s, $SECONDS_EACH s, $ROUNDS rounds)"
# Counted by perf (instructions:u, which the machine's load barely moves, and task-clock),
# start-up included: the replay's scan of its log, the plain run's schema.
python3 bench/replay_log.py "$work/cpu.binlog" $((RATE * SECONDS_EACH)) "$RATE" 100
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
counted() { perf stat -x, -e instructions:u,task-clock -o "$1" "$rpcmeter" run --plaintext --no-save --no-calibrate -q --format json "${@:2}" "$addr"; }
for round in $(seq "$ROUNDS"); do
  counted "$work/replay.$round.perf" --replay "$work/cpu.binlog" >"$work/replay.$round.json"
  counted "$work/plain.$round.perf" --proto "$work/protos/both.proto" -i "$work/protos" \
    --workload "$work/mix.toml" --rps "$RATE" -z "${SECONDS_EACH}s" >"$work/plain.$round.json"
done
# perf's CSV: value,unit,event,...: per call (the result's calls), min/median/max, the ratios.
# A VM without a PMU ("PMU not available due to virtualization" in dmesg) counts no
# instructions (perf says <not supported>): then only the CPU time (task-clock) is given.
python3 - "$work" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def per_call(kind, r):
    n = json.load(open(f"{work}/{kind}.{r}.json"))["requests"]["total"]
    counts = {}
    for line in open(f"{work}/{kind}.{r}.perf"):
        cells = line.strip().split(",")
        if len(cells) > 2 and cells[0][:1].isdigit():
            counts[cells[2].split(":")[0]] = float(cells[0]) / n
    return counts.get("instructions"), counts["task-clock"] * 1000, n
rows = {kind: [per_call(kind, r) for r in range(1, rounds + 1)] for kind in ("replay", "plain")}
show = lambda x, f: "n/a" if x is None else f.format(x)
for r in range(rounds):
    (ri, rc, rn), (pi, pc, pn) = rows["replay"][r], rows["plain"][r]
    print(f"round {r + 1}: replay {show(ri, '{:.0f}')} instructions/call, {rc:.2f} µs CPU/call ({rn} calls); "
          f"plain {show(pi, '{:.0f}')}, {pc:.2f} ({pn})")
for at, what, f in ((0, "instructions/call", "{:.0f}"), (1, "CPU µs/call", "{:.2f}")):
    if any(g[at] is None for got in rows.values() for g in got):
        print(f"{what}: not counted on this machine")
        continue
    for kind, got in rows.items():
        v = [g[at] for g in got]
        print(f"{kind}: {what} min/median/max " + "/".join(f.format(x) for x in (min(v), statistics.median(v), max(v))))
    median = lambda kind: statistics.median(g[at] for g in rows[kind])
    print(f"replay / plain, median {what}: {median('replay') / median('plain'):.3f}")
PY
fi
