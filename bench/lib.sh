# What both benchmarks share (sourced, not run): a work dir and servers cleaned up on exit,
# peers installed when missing, servers on free ports of 127.0.0.1 only.
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

have() { command -v "$1" >/dev/null 2>&1; }
apt_updated=
apt_install() {
  [[ -n $apt_updated ]] || { apt-get update -qq; apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
export PATH="$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin:$PATH"

# python3 and rpcmeter, built in release: sets rpcmeter.
build_rpcmeter() {
  have python3 || apt_install python3
  cargo build --release --quiet --bin rpcmeter
  rpcmeter="${CARGO_TARGET_DIR:-target}/release/rpcmeter"
}

# RPCMETER_BIN, a built binary, when given; else build_rpcmeter. Sets rpcmeter.
rpcmeter_or_build() {
  if [[ -n ${RPCMETER_BIN:-} ]]; then rpcmeter=$RPCMETER_BIN; else build_rpcmeter; fi
}

# h2load (nghttp2), /usr/bin/time and fortio; then build_rpcmeter.
install_peers() {
  have h2load || apt_install nghttp2-client
  [[ -x /usr/bin/time ]] || apt_install time
  have fortio || go install fortio.org/fortio@v1.65.0
  build_rpcmeter
}

install_ghz() { have ghz || go install github.com/bojand/ghz/cmd/ghz@latest; }

# The machine's idle setting, which prices every wake-up of a thread (docs/design.md, "The
# open loop at 80%"): the cpuidle driver and, on a VM's haltpoll driver, how long an idle vCPU
# polls before it halts (0: it halts at once, and waking it takes an exit to the host).
idle_setting() {
  local driver poll
  driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)
  poll=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || true)
  echo "cpuidle driver: $driver${poll:+, guest halt polling: $poll ns}"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}

# fortio's gRPC ping server (grpc-go), one thread per core (GOMAXPROCS): sets fortio_addr.
start_fortio() {
  local port
  port=$(free_port)
  GOMAXPROCS=$(nproc) fortio server -grpc-port "127.0.0.1:$port" -http-port "127.0.0.1:$(free_port)" \
    -redirect-port disabled -tcp-port disabled -udp-port disabled -loglevel Warning >"$work/fortio.log" 2>&1 &
  pids+=($!)
  wait_port "$port"
  fortio_addr=127.0.0.1:$port
}

# `rpcmeter serve`, async on 2 threads with room for 64 streams x 2 (none refused), or with
# the flags given: sets serve_addr, serve_pid and serve_out (its stdout). With SERVE_CPU=N:
# one thread, on core N alone (taskset).
start_serve() {
  local pin=() threads=2
  [[ -n ${SERVE_CPU:-} ]] && pin=(taskset -c "$SERVE_CPU") && threads=1
  local flags=("$@")
  [[ $# -gt 0 ]] || flags=(--model async --threads "$threads" --per-thread 64)
  serve_out=$(mktemp -p "$work" serve.XXXX.out)
  "${pin[@]}" "$rpcmeter" serve --addr 127.0.0.1:0 "${flags[@]}" >"$serve_out" 2>"$work/serve.err" &
  serve_pid=$!
  pids+=($serve_pid)
  local line=
  for _ in $(seq 100); do
    line=$(head -n 1 "$serve_out" 2>/dev/null || true)
    [[ $line == "listening on "* ]] && break
    sleep 0.1
  done
  [[ $line == "listening on "* ]] || { echo "rpcmeter serve did not start: $(tail -n 1 "$work/serve.err")" >&2; return 1; }
  serve_addr=${line#listening on }
}

# sample_rss OUT PID [PID...]: every second, one line of each PID's RSS in KB into OUT, for
# as long as the first PID runs (at most an hour); then fails if it still runs.
sample_rss() {
  local out=$1 first=$2
  shift
  : >"$out"
  local line rss pid
  for _ in $(seq 3600); do
    line=
    for pid in "$@"; do
      rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 0
      [[ -n $rss ]] || return 0
      line+="${line:+ }$rss"
    done
    echo "$line" >>"$out"
    sleep 1
  done
  ! kill -0 "$first" 2>/dev/null
}

# measure LABELS TOOL COMMAND...: runs a client (h2load, ghz, fortio or rpcmeter, by TOOL) under
# /usr/bin/time and appends a row to $results: LABELS (words, one column each), TOOL, its OK calls/s,
# client CPU µs per OK call (user+sys, start-up included) and max RSS in KB.
measure() {
  local labels=$1 tool=$2
  shift 2
  if ! /usr/bin/time -f '%U %S %M' -o "$work/time" "$@" >"$work/out" 2>"$work/err"; then
    echo "$tool ($labels) failed: $(tail -n 2 "$work/err" | tr '\n' ' ')" >&2
    return 0
  fi
  local calls rate user sys rss_kb
  read -r calls rate < <(python3 - "$tool" "$work/out" <<'PY'
import json, re, sys
tool, text = sys.argv[1], open(sys.argv[2]).read()
if tool == "h2load":
    # Calls whose HTTP status was 2xx: h2load does not read grpc-status.
    calls = int(re.search(r"requests: .* (\d+) succeeded", text).group(1))
    rate = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", text).group(1))
elif tool == "ghz":
    r = json.loads(text)
    calls = sum(n for code, n in r["statusCodeDistribution"].items() if code == "OK")
    rate = r["rps"] * calls / r["count"]
elif tool == "fortio":
    r = json.loads(text)
    calls = r["RetCodes"].get("SERVING", 0)
    rate = calls / (r["ActualDuration"] / 1e9)
else:
    r = json.loads(text)
    calls = r["requests"]["ok"]
    rate = calls / r["duration_s"]
print(calls, rate)
PY
  )
  read -r user sys rss_kb <"$work/time"
  printf '%s\t%s\t%s\t%s\t%s\n' "${labels// /$'\t'}" "$tool" "$rate" \
    "$(python3 -c "print(($user + $sys) * 1e6 / max($calls, 1))")" "$rss_kb" >>"$results"
}
