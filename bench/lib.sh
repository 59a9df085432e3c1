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

# h2load (nghttp2), /usr/bin/time, python3 and fortio; then rpcmeter, built in release.
install_peers() {
  have python3 || apt_install python3
  have h2load || apt_install nghttp2-client
  [[ -x /usr/bin/time ]] || apt_install time
  have fortio || go install fortio.org/fortio@v1.65.0
  cargo build --release --quiet --bin rpcmeter
  rpcmeter="${CARGO_TARGET_DIR:-target}/release/rpcmeter"
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
