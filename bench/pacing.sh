#!/usr/bin/env bash
# How exactly `rpcmeter run --rps` keeps its schedule: schedule lag (actual - intended send)
# p50/p99/max and client CPU per call at 10, 100, 1k and 10k calls/s and at 80% of the
# closed-loop maximum, against `rpcmeter serve` echo on 127.0.0.1. ROUNDS interleaved rounds
# (default 3): each rate once per round, so a busy moment of the machine spreads over all of
# them; the table gives the median and the range of the rounds, then the CPU per call at 80% of
# the maximum against closed loop's. The last column: the machine's hiccups measured during each run.
# Then the same ratio for rpcmeter, ghz and fortio, each at 80% of its own closed-loop maximum
# against fortio's ping server (grpc-go), CPU from /usr/bin/time as in bench/run.sh: what the
# ratio looks like for clients that spend 10x more per call (docs/design.md, "The open loop at
# 80%"). PEERS=0 skips it.
#
#   bench/pacing.sh                 SECS per run (default 5), ROUNDS (default 3)
#   PIN=1 bench/pacing.sh           the server on the last core alone, the client on the others:
#                                   the lag without the server taking the client's core
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-3}
source bench/lib.sh
if [[ ${PEERS:-1} == 1 ]]; then
  install_peers
  install_ghz
else
  build_rpcmeter
fi
idle_setting
client=("$rpcmeter")
if [[ ${PIN:-} == 1 ]]; then
  last=$(($(nproc) - 1))
  ((last > 0)) || { echo "PIN=1 needs 2 cores or more" >&2; exit 2; }
  export SERVE_CPU=$last
  client=(taskset -c "0-$((last - 1))" "$rpcmeter")
fi
start_serve
# Calibrated (cached per machine), so that every run also measures the machine's hiccups
# (jHiccup's 1 ms sleep loop) beside its lag: a lag no smaller than the hiccups is the machine's.
"$rpcmeter" calibrate >/dev/null
call=(--plaintext --call EchoService/echo -d '{"content":"hi"}' -q --format json --no-server-stats)

# The closed-loop maximum on this machine now (c=8, one connection).
"${client[@]}" run "${call[@]}" -c 8 -z "${SECS}s" "$serve_addr" >"$work/closed.json"
max=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["throughput_rps"]))' "$work/closed.json")
eighty=$((max * 8 / 10))
rates=(10 100 1000 10000 "$eighty")

for round in $(seq "$ROUNDS"); do
  for rate in "${rates[@]}"; do
    "${client[@]}" run "${call[@]}" --rps "$rate" -z "${SECS}s" --max-in-flight 256 "$serve_addr" \
      >"$work/r$round-$rate.json"
  done
done

if [[ ${PEERS:-1} == 1 ]]; then
  # Each client: c=8 on one connection, then an open loop at 80% of that round's maximum (ghz:
  # --rps with 8 workers; fortio: -qps over 8 streams; rpcmeter as above), ROUNDS interleaved.
  start_fortio
  results=$work/peers.tsv
  : >"$results"
  ping=(--plaintext --proto bench/ping.proto --call fgrpc.PingServer/Ping -d '{"payload":"hi"}' -q --format json
    --no-server-stats -z "${SECS}s")
  ghz_ping=(ghz --insecure --proto bench/ping.proto --call fgrpc.PingServer.Ping -d '{"payload":"hi"}' -c 8
    --connections 1 -z "${SECS}s" -O json)
  fortio_ping=(fortio load -grpc -ping -payload hi -c 1 -s 8 -t "${SECS}s" -loglevel Warning -json -)
  # open_rate ROUND TOOL: 80% of the calls/s TOOL's closed loop reached in ROUND.
  open_rate() { awk -F'\t' -v r="$1" -v t="$2" '$1 == r && $2 == "closed" && $3 == t { print int($4 * 0.8) }' "$results"; }
  for round in $(seq "$ROUNDS"); do
    echo "peers, round $round of $ROUNDS ..." >&2
    measure "$round closed" rpcmeter "$rpcmeter" run "${ping[@]}" -c 8 "$fortio_addr"
    measure "$round closed" ghz "${ghz_ping[@]}" "$fortio_addr"
    measure "$round closed" fortio "${fortio_ping[@]}" -qps 0 "$fortio_addr"
    rate=$(open_rate "$round" rpcmeter)
    [[ -z $rate ]] || measure "$round open" rpcmeter "$rpcmeter" run "${ping[@]}" --rps "$rate" --max-in-flight 256 \
      "$fortio_addr"
    rate=$(open_rate "$round" ghz)
    [[ -z $rate ]] || measure "$round open" ghz "${ghz_ping[@]}" --rps "$rate" "$fortio_addr"
    rate=$(open_rate "$round" fortio)
    [[ -z $rate ]] || measure "$round open" fortio "${fortio_ping[@]}" -qps "$rate" "$fortio_addr"
  done
fi

python3 - "$work" "$ROUNDS" "$max" "${rates[@]}" <<'PY'
import collections, json, os, statistics, sys
work, rounds, closed_max, rates = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
closed = json.load(open(f"{work}/closed.json"))
closed_cpu = closed["client"]["cpu_us_per_request"]
print(f"closed-loop maximum (c=8): {closed_max} calls/s at {closed_cpu:.1f} µs CPU/call; "
      f"{rounds} interleaved rounds, median [min-max]")
print(f"{'rate':>8} {'sent/s':>9} {'lag p50 µs':>18} {'lag p99 µs':>22} {'lag max µs':>22} {'CPU µs/call':>18} "
      f"{'late':>6} {'hiccup p99 µs':>22}")
def cell(values, fmt="{:.1f}"):
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"
for rate in rates:
    runs = [json.load(open(f"{work}/r{r}-{rate}.json")) for r in range(1, rounds + 1)]
    lag = lambda k: [r["schedule_lag_us"][k] for r in runs]
    print(f"{rate:>8} {statistics.median(r['throughput_rps'] for r in runs):>9.1f} {cell(lag('p50')):>18} "
          f"{cell(lag('p99')):>22} {cell(lag('max'), '{:.0f}'):>22} "
          f"{cell([r['client']['cpu_us_per_request'] for r in runs]):>18} {max(r['late_sends'] for r in runs):>6} "
          f"{cell([(r['client'].get('hiccup_us') or {}).get('p99', float('nan')) for r in runs]):>22}")
eighty = [json.load(open(f"{work}/r{r}-{rates[-1]}.json"))["client"]["cpu_us_per_request"] for r in range(1, rounds + 1)]
print(f"CPU per call at 80% of the maximum / closed loop: {statistics.median(eighty) / closed_cpu:.2f}x "
      f"[{min(eighty) / closed_cpu:.2f}-{max(eighty) / closed_cpu:.2f}] (issue 18's target: <= 1.2x)")
peers = f"{work}/peers.tsv"
if os.path.exists(peers):
    peer_runs = collections.defaultdict(dict)  # (tool, round) -> mode -> (calls/s, µs/call)
    for line in open(peers):
        if line.strip():
            round_, mode, tool, rate, cpu, _ = line.rstrip("\n").split("\t")
            peer_runs[tool, round_][mode] = (float(rate), float(cpu))
    print(f"\neach client at 80% of its own closed-loop maximum, against fortio's ping server (grpc-go); "
          f"CPU = user+sys of the client process; {rounds} interleaved rounds, median [min-max]")
    print(f"{'client':>9} {'closed calls/s':>15} {'closed µs/call':>20} {'open calls/s':>13} {'open µs/call':>20} "
          f"{'open / closed':>20}")
    for tool in ("rpcmeter", "ghz", "fortio"):
        both = [m for (t, _), m in sorted(peer_runs.items()) if t == tool and "closed" in m and "open" in m]
        if not both:
            print(f"{tool:>9} (no complete round)")
            continue
        closed_loop, open_loop = [m["closed"] for m in both], [m["open"] for m in both]
        print(f"{tool:>9} {statistics.median(r for r, _ in closed_loop):>15,.0f} {cell([c for _, c in closed_loop]):>20} "
              f"{statistics.median(r for r, _ in open_loop):>13,.0f} {cell([c for _, c in open_loop]):>20} "
              f"{cell([o[1] / c[1] for o, c in zip(open_loop, closed_loop)], '{:.2f}').replace(' ', 'x ', 1):>20}")
PY
