// What a wake-up costs this machine, in CPU of the thread woken: the floor under the client's
// CPU per call (docs/design.md, "The open loop at 80%"). Built and run by bench/wakeup.sh.
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

// One byte back and forth over a socket pair, each thread parked in epoll_wait between.
static void bounce(int fd, int first) {
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN}, got;
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  char c = 1;
  for (int i = 0; i < ROUND_TRIPS; i++) {
    if (first && write(fd, &c, 1) != 1) return;
    epoll_wait(ep, &got, 1, -1);
    if (read(fd, &c, 1) != 1) return;
    if (!first && write(fd, &c, 1) != 1) return;
  }
  close(ep);
}

static void *peer(void *unused) {
  (void)unused;
  bounce(pair[1], 0);
  return NULL;
}

int main(void) {
  socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
  pthread_t t;
  pthread_create(&t, NULL, peer, NULL);
  double start = thread_cpu_us();
  bounce(pair[0], 1);
  printf("socket wake-up, each thread parked in epoll_wait: %.1f us CPU per round trip\n",
         (thread_cpu_us() - start) / ROUND_TRIPS);
  pthread_join(t, NULL);

  int fd = timerfd_create(CLOCK_MONOTONIC, 0);
  struct itimerspec soon = {.it_value = {.tv_nsec = 50000}}, off = {0};
  uint64_t expirations;
  start = thread_cpu_us();
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
