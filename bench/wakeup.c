// What a wake-up costs this machine, in CPU of the threads involved: the floor under the
// client's CPU per call (docs/design.md, "The open loop at 80%"): who pays it (the waker, the
// woken) and what it costs when the peer never parks. Built and run by bench/wakeup.sh.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum { ROUND_TRIPS = 100000, TIMERS = 20000 };
static int pair[2];

static double thread_cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// One byte back and forth over a socket pair, each thread parked in epoll_wait between, or
// (spin) polling epoll without parking. With in_writes, the CPU spent in the writes, each of
// which wakes the other thread when it is parked, is added to *in_writes.
static void bounce(int fd, int first, int spin, double *in_writes) {
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN}, got;
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  char c = 1;
  for (int i = 0; i < ROUND_TRIPS; i++) {
    double start = in_writes ? thread_cpu_us() : 0;
    if (first && write(fd, &c, 1) != 1) return;
    if (in_writes && first) *in_writes += thread_cpu_us() - start;
    while (epoll_wait(ep, &got, 1, spin ? 0 : -1) == 0) {
    }
    if (read(fd, &c, 1) != 1) return;
    start = in_writes ? thread_cpu_us() : 0;
    if (!first && write(fd, &c, 1) != 1) return;
    if (in_writes && !first) *in_writes += thread_cpu_us() - start;
  }
  close(ep);
}

static void *peer(void *spins) {
  bounce(pair[1], 0, *(int *)spins, NULL);
  return NULL;
}

// The CPU of the first thread per round trip, the peer parking or spinning.
static double round_trip(int peer_spins, double *in_writes) {
  pthread_t t;
  pthread_create(&t, NULL, peer, &peer_spins);
  double start = thread_cpu_us();
  bounce(pair[0], 1, 0, in_writes);
  double cpu = thread_cpu_us() - start;
  pthread_join(t, NULL);
  return cpu / ROUND_TRIPS;
}

int main(void) {
  socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
  printf("socket wake-up, each thread parked in epoll_wait: %.1f us CPU per round trip\n", round_trip(0, NULL));
  double in_writes = 0;
  round_trip(0, &in_writes);
  printf("  of it in the write that wakes the parked peer: %.1f us (timed by clock reads, which add their own)\n",
         in_writes / ROUND_TRIPS);
  printf("the same with the peer never parked (polling epoll): %.1f us CPU per round trip in the parked thread\n",
         round_trip(1, NULL));

  int fd = timerfd_create(CLOCK_MONOTONIC, 0);
  struct itimerspec soon = {.it_value = {.tv_nsec = 50000}}, off = {0};
  uint64_t expirations;
  double start = thread_cpu_us();
  for (int i = 0; i < TIMERS; i++) {
    timerfd_settime(fd, 0, &soon, NULL);
    timerfd_settime(fd, 0, &off, NULL);
  }
  printf("timerfd armed 50 us ahead and disarmed: %.1f us CPU per pair\n", (thread_cpu_us() - start) / TIMERS);
  start = thread_cpu_us();
  for (int i = 0; i < TIMERS; i++) {
    timerfd_settime(fd, 0, &soon, NULL);
    if (read(fd, &expirations, sizeof expirations) != sizeof expirations) return 1;
  }
  printf("sleep of 50 us ended by a timerfd: %.1f us CPU per sleep\n", (thread_cpu_us() - start) / TIMERS);
  return 0;
}
