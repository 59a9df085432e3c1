#!/usr/bin/env bash
# What a wake-up of a thread costs this machine in CPU: two threads bouncing a byte over a
# socket pair (each parked in epoll_wait between), a timerfd armed and disarmed, a sleep ended
# by a timerfd. On a VM each can cost 5-20 µs, the floor under a client's CPU per call when
# its calls are few per wake-up (docs/design.md, "The open loop at 80%"). Runs in a second.
#
#   bench/wakeup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
have cc || apt_install gcc libc6-dev
cc -O2 -pthread bench/wakeup.c -o "$work/wakeup"
idle_setting
echo "two threads on $(nproc) cores:"
"$work/wakeup"
if have taskset && (($(nproc) > 1)); then
  echo "both threads on one core (no idle core to wake):"
  taskset -c 0 "$work/wakeup" | head -n 2
fi
