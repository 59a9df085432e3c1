//! A precise sleep for the open loop's sends, hand-written because no crate gives one on a
//! tokio current-thread runtime: tokio's timer wakes on 1 ms ticks (a 5000 calls/s open loop
//! showed schedule lag p50 1.04 ms with it). Here a Linux timerfd (an hrtimer, ns resolution)
//! wakes the runtime shortly before the due time, and the last stretch is waited out by
//! yielding to the runtime, which keeps answering calls meanwhile. The stretch adapts to how
//! late this machine's wake-ups are, so the spinning costs only what precision needs, and never
//! more than half the time between sends. When wake-ups are late by several sends' worth
//! anyway (a loaded machine at a high rate), sends are grouped instead: one wake-up sends all
//! calls due within the lateness the machine imposes, and none spins.
//!
//! One timerfd per thread serves all its workers (`Timer::driving`): the wake-ups they wait
//! for are kept in order and the timerfd is armed for the earliest, so a group of sends
//! costs one arming and one wake-up of the runtime, and an expiry wakes only the workers
//! whose time it is. `stop` ends every wait at once: a run that stops sending tells the
//! timer once, instead of each send also waiting on the run's phase (a watch receiver cloned,
//! polled and dropped per send was a fifth of the open loop's extra user time over closed
//! loop's at 80k calls/s).
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::{pending, poll_fn, Future};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

/// Bounds of the stretch waited out by yielding: below the floor no wake-up is that prompt,
/// above the ceiling a late machine would cost more CPU than precision is worth (on 2 shared
/// cores, a client that spins takes the time from the server it measures).
const MIN_MARGIN: Duration = Duration::from_micros(20);
const MAX_MARGIN: Duration = Duration::from_micros(500);

/// How late wake-ups have been on this thread, and how far apart its sends are due.
struct Margin {
    late: Cell<Duration>,
    /// Smoothed time between consecutive due times on this thread, and the last one.
    gap: Cell<Duration>,
    last_due: Cell<Option<Instant>>,
    /// Grouping: the wake-up of the group still open (sends due by then join it).
    group: Cell<Option<Instant>>,
}

impl Default for Margin {
    fn default() -> Self {
        Margin {
            late: Cell::new(Duration::from_micros(200)),
            gap: Cell::new(Duration::MAX),
            last_due: Cell::new(None),
            group: Cell::new(None),
        }
    }
}

/// How a send due at some time is waited for.
#[derive(Debug, PartialEq, Eq)]
enum Wait {
    /// Timer until `wake`, then yield until the due time.
    Precise { wake: Instant },
    /// Timer until the group's wake-up (at or after the due time), no yielding.
    Grouped { wake: Instant },
}

impl Margin {
    /// The stretch before `due` waited out by yielding: the 99th percentile of lateness, but
    /// at most half the time between sends. When sends come faster than wake-ups are
    /// prompt (20k calls/s on 2 cores), covering the lateness would mean spinning all the
    /// time: a core taken from the server under test for a precision the busy machine does
    /// not give anyway (bench/pacing.sh measures both).
    fn get(&self) -> Duration {
        self.late.get().min(self.gap.get() / SPIN_SHARE)
    }

    /// Learns from a wake-up `late` after its target, tracking the 99th percentile of
    /// lateness (a Robbins-Monro quantile estimate: up by 99 steps after a wake-up later than
    /// the margin, down by one otherwise), so that 99% of waits end spinning on time, while a
    /// rare very late wake-up (a VM's host descheduling us) moves it by one step only.
    fn learn(&self, late: Duration) {
        let margin = self.late.get();
        let next = if late > margin { margin + QUANTILE_STEP * 99 } else { margin.saturating_sub(QUANTILE_STEP) };
        self.late.set(next.clamp(MIN_MARGIN, MAX_MARGIN));
    }

    /// How to wait for a send due at `due` (after `note_due(due)`).
    ///
    /// Precise while a late wake-up (99th percentile) spans fewer than GROUP_AT gaps between
    /// sends. Beyond that, spinning stops buying precision: on 2 cores at 24,000 calls/s
    /// (sends 42 µs apart, wake-ups late by p99 ~330 µs), precise waits cost 2.0-2.2x closed
    /// loop's CPU per call and took the co-located server's core (latency p99 3.9-5.7 ms).
    /// Grouped, a call waits without spinning until the open group's wake-up, one lateness
    /// after the group's first due time: about late/gap calls share a wake-up and none is
    /// sent early. Same runs: 1.2-1.5x closed loop's CPU, latency p99 3.2-4.0 ms, lag p99
    /// 0.5-0.8 ms (0.4-0.6 before), lag p50 ~0.2 ms instead of ~5 µs (counted in latency like
    /// any lag). With one timer per thread since (`Timer`), a group costs one wake-up:
    /// 1.03x closed loop's CPU at 80% of the maximum (bench/pacing.sh). GROUP_UNTIL <
    /// GROUP_AT keeps a rate near the border from flipping.
    fn wait_for(&self, due: Instant) -> Wait {
        let (late, gap) = (self.late.get(), self.gap.get());
        let overlapped =
            if gap.is_zero() { u32::MAX } else { (late.as_nanos() / gap.as_nanos()).min(u32::MAX as u128) as u32 };
        let open = self.group.get();
        if overlapped < if open.is_some() { GROUP_UNTIL } else { GROUP_AT } {
            self.group.set(None);
            return Wait::Precise { wake: due.checked_sub(self.get()).unwrap_or(due) };
        }
        let wake = match open {
            Some(open) if due <= open => open,
            _ => due.checked_add(late).unwrap_or(due),
        };
        self.group.set(Some(wake));
        Wait::Grouped { wake }
    }

    /// Notes the next due time, for the gap between sends (an average over about 16 sends).
    fn note_due(&self, due: Instant) {
        if let Some(last) = self.last_due.replace(Some(due)) {
            let gap = due.saturating_duration_since(last);
            let smoothed = match self.gap.get() {
                Duration::MAX => gap,
                old => old - old / 16 + gap / 16,
            };
            self.gap.set(smoothed);
        }
    }
}

/// At most 1/SPIN_SHARE of the time between sends is spent spinning.
const SPIN_SHARE: u32 = 2;

/// Sends are grouped while a late wake-up (99th percentile) spans GROUP_AT gaps between
/// sends, and again waited for one by one once it spans fewer than GROUP_UNTIL.
const GROUP_AT: u32 = 6;
const GROUP_UNTIL: u32 = 3;

/// The estimate's step: converges within a few hundred wake-ups (the rate's first seconds at
/// 100 calls/s) and jitters by about a step times 99 around the percentile.
const QUANTILE_STEP: Duration = Duration::from_nanos(100);

/// A thread's timer for the open loop's sends: a timerfd registered with the runtime, and
/// the wake-ups its workers wait for; falls back to tokio's timer where a timerfd cannot be
/// made (no descriptors left). Made inside the thread's runtime; its waits end only inside
/// `driving`.
pub struct Timer {
    fd: Option<AsyncFd<OwnedFd>>,
    margin: Margin,
    /// The wake-ups waited for, earliest first, and whom each wakes. A dropped waiter's stays
    /// until its time (one spurious wake of its task).
    waiting: RefCell<VecDeque<(Instant, Waker)>>,
    /// The expiry the timerfd is armed for, until `drive` sees it pass.
    armed: Cell<Option<Instant>>,
    /// The last wake-up whose lateness `margin` learned.
    learned: Cell<Option<Instant>>,
    /// Set by `stop`: every wait ends at once, false.
    stopped: Cell<bool>,
    /// Wakes the waits on tokio's timer, where no timerfd could be made.
    stopping: tokio::sync::Notify,
}

impl Timer {
    pub fn new() -> Timer {
        // SAFETY: timerfd_create has no preconditions; the result is checked before use.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        // SAFETY: a non-negative result is a fresh descriptor that nothing else owns.
        let fd = (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) });
        // SAFETY: the timerfd is owned by the AsyncFd and closed only when it is dropped.
        let fd = fd.and_then(|fd| unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok());
        Timer {
            fd,
            margin: Margin::default(),
            waiting: RefCell::new(VecDeque::new()),
            armed: Cell::new(None),
            learned: Cell::new(None),
            stopped: Cell::new(false),
            stopping: tokio::sync::Notify::new(),
        }
    }

    /// Ends every wait, those under way and those to come: they return false.
    pub fn stop(&self) {
        self.stopped.set(true);
        for (_, waker) in self.waiting.borrow_mut().drain(..) {
            waker.wake();
        }
        self.stopping.notify_waiters();
    }

    /// Returns at `due` or after it: within microseconds while waits are precise, within one
    /// lateness when sends are grouped (`Margin::wait_for`). False, at once, after `stop`.
    pub async fn sleep_until(&self, due: Instant) -> bool {
        self.margin.note_due(due);
        let (Wait::Precise { wake } | Wait::Grouped { wake }) = self.margin.wait_for(due);
        // The lateness as the first of a wake-up's waiters sees it, polled after the tasks
        // woken before it: the stretch a precise wait must cover. The group's later members
        // are later by their own group's work, not the machine's.
        if let Some(woke) = self.until(wake).await {
            if self.learned.replace(Some(wake)) != Some(wake) {
                self.margin.learn(woke - wake);
            }
        }
        // Grouped waits end at or after the due time: this loop does not turn.
        while Instant::now() < due {
            if self.stopped.get() {
                return false;
            }
            tokio::task::yield_now().await;
        }
        !self.stopped.get()
    }

    /// Returns once the clock has reached `wake` (or at `stop`): the time it woke, or None
    /// when it did not wait on the timerfd (`wake` already passed, tokio's timer stood in, or
    /// the timer stopped).
    async fn until(&self, wake: Instant) -> Option<Instant> {
        let Some(fd) = &self.fd else {
            let stopping = self.stopping.notified();
            if !self.stopped.get() {
                tokio::select! {
                    _ = tokio::time::sleep_until(wake.into()) => {}
                    _ = stopping => {}
                }
            }
            return None;
        };
        let mut registered: Option<Waker> = None;
        poll_fn(|cx| {
            if self.stopped.get() {
                return Poll::Ready(None);
            }
            let now = Instant::now();
            if now >= wake {
                return Poll::Ready(registered.is_some().then_some(now));
            }
            if !registered.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                if !self.add(fd, wake, now, cx.waker().clone()) {
                    // The timerfd refused a time: the wait ends early rather than never.
                    return Poll::Ready(None);
                }
                registered = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Adds a wake-up and arms for it when it is the earliest. The expirations are never read
    /// (a syscall per wake-up saved): arming resets their count, and each expiry is a new edge
    /// for the runtime's epoll. So an armed expiry already passed is an edge on its way, and
    /// re-arming now would take it from the waiters it is for (epoll drops an event whose fd
    /// is no longer readable): `drive` arms the next one once it has seen that edge. False if
    /// arming failed.
    fn add(&self, fd: &AsyncFd<OwnedFd>, wake: Instant, now: Instant, waker: Waker) -> bool {
        let mut waiting = self.waiting.borrow_mut();
        let at = waiting.partition_point(|(other, _)| *other <= wake);
        waiting.insert(at, (wake, waker));
        if self.armed.get().is_some_and(|armed| armed <= wake) {
            return true;
        }
        self.armed.set(Some(wake));
        arm(fd.get_ref(), wake - now)
    }

    /// Runs `work` to its end beside the driver that wakes its waits.
    pub async fn driving<T>(&self, work: impl Future<Output = T>) -> T {
        tokio::select! {
            out = work => out,
            never = self.drive() => match never {},
        }
    }

    /// Wakes the waiters whose time has come.
    async fn drive(&self) -> Infallible {
        let Some(fd) = &self.fd else { return pending().await };
        loop {
            let Ok(mut ready) = fd.readable().await else { return pending().await };
            ready.clear_ready();
            let now = Instant::now();
            if self.armed.get().is_none_or(|armed| armed > now) {
                continue;
            }
            let mut waiting = self.waiting.borrow_mut();
            let served = waiting.partition_point(|(wake, _)| *wake <= now);
            for (_, waker) in waiting.drain(..served) {
                waker.wake();
            }
            let next = waiting.front().map(|(next, _)| *next);
            self.armed.set(next);
            if let Some(next) = next {
                arm(fd.get_ref(), next - now);
            }
        }
    }
}

impl Default for Timer {
    fn default() -> Self {
        Timer::new()
    }
}

/// Asks the kernel to fire this thread's timers on time: by default it may defer a normal
/// thread's timer by up to 50 µs to batch wake-ups (timer slack, prctl(2) PR_SET_TIMERSLACK),
/// a delay every paced send would inherit.
pub fn no_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Arms the timerfd once, `after` from now.
fn arm(fd: &OwnedFd, after: Duration) -> bool {
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            // A zero value would disarm the timer: at least 1 ns.
            tv_nsec: (after.subsec_nanos().max(if after.as_secs() == 0 { 1 } else { 0 })) as libc::c_long,
        },
    };
    // SAFETY: the descriptor is a timerfd we own; the spec is a valid, initialized struct.
    unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `waits` on a current-thread runtime beside the timer's driver.
    fn with_timer<T>(waits: impl AsyncFnOnce(&Timer) -> T) -> T {
        with_made_timer(Timer::new, waits)
    }

    /// The same with the timer `make` returns (made inside the runtime).
    fn with_made_timer<T>(make: impl FnOnce() -> Timer, waits: impl AsyncFnOnce(&Timer) -> T) -> T {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let timer = make();
            timer.driving(waits(&timer)).await
        })
    }

    /// `stop` ends the waits under way at once, false, and every later one too; on the
    /// timerfd and on tokio's timer alike.
    #[test]
    fn stop_ends_every_wait_at_once() {
        let on_tokio = || Timer { fd: None, ..Timer::new() };
        for (make, name) in [(Timer::new as fn() -> Timer, "timerfd"), (on_tokio, "tokio's timer")] {
            let (first, second, ended, later) = with_made_timer(make, async |timer| {
                let far = Instant::now() + Duration::from_secs(2);
                let started = Instant::now();
                let (first, second, _) = tokio::join!(timer.sleep_until(far), timer.sleep_until(far), async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    timer.stop();
                });
                let ended = started.elapsed();
                (first, second, ended, timer.sleep_until(far).await)
            });
            assert!(!first && !second, "{name}: a stopped wait said it reached its time");
            assert!(ended < Duration::from_secs(1), "{name}: waits ended {ended:?} after the start, not at the stop");
            assert!(!later, "{name}: a wait after stop went on");
        }
    }

    #[test]
    fn sleeps_end_at_their_due_time_not_a_tick_later() {
        let mut lateness = with_timer(async |timer| {
            let mut late = Vec::new();
            for i in 0..50u64 {
                let due = Instant::now() + Duration::from_micros(300 + 37 * i);
                timer.sleep_until(due).await;
                late.push(Instant::now() - due);
            }
            late
        });
        lateness.sort();
        // Never early; and the median far below tokio's 1 ms tick (a loose bound: CI machines
        // are shared, the benchmark in bench/ measures the real numbers).
        assert!(lateness[25] < Duration::from_micros(500), "median lateness {:?}", lateness[25]);
    }

    /// Counts the wake-ups of a task.
    #[derive(Default)]
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn each_waiter_is_woken_at_its_own_time_and_not_before() {
        with_timer(async |timer| {
            let t0 = Instant::now();
            let at = |ms: u64| t0 + Duration::from_millis(ms);
            let woke_at = async |ms: u64| timer.until(at(ms)).await.expect("woken by the timerfd");
            // Each waiter polled once, as a task is, by a waker that counts its wake-ups.
            let poll_counted = |wait: std::pin::Pin<&mut _>| {
                let wakes = std::sync::Arc::new(Wakes::default());
                let waker = Waker::from(wakes.clone());
                let polled = std::future::Future::poll(wait, &mut std::task::Context::from_waker(&waker));
                assert!(polled.is_pending());
                move || wakes.0.load(std::sync::atomic::Ordering::Relaxed)
            };
            // Armed for 20 ms; the thread stalls past it, so that expiry is still on its way
            // when a waiter for 300 ms comes: arming for that one would lose it.
            let mut first = std::pin::pin!(woke_at(20));
            let first_woken = poll_counted(first.as_mut());
            std::thread::sleep(Duration::from_millis(40));
            let mut later = std::pin::pin!(woke_at(300));
            let later_woken = poll_counted(later.as_mut());
            tokio::time::sleep(Duration::from_millis(60)).await;
            assert_eq!(first_woken(), 1, "the 20 ms waiter, 100 ms in");
            assert_eq!(later_woken(), 0, "the 300 ms waiter, 100 ms in");
            // A waiter that moved the timer earlier and was dropped strands no one.
            let mut last = std::pin::pin!(woke_at(400));
            assert!(futures::poll!(last.as_mut()).is_pending());
            {
                let mut dropped = std::pin::pin!(woke_at(350));
                assert!(futures::poll!(dropped.as_mut()).is_pending());
            }
            let (later, last) = tokio::join!(later, last);
            for (woke, due) in [(later, at(300)), (last, at(400))] {
                assert!(woke >= due && woke < due + Duration::from_millis(100), "{:?} for {:?}", woke - t0, due - t0);
            }
        });
    }

    #[test]
    fn the_margin_follows_the_99th_percentile_of_late_wake_ups() {
        let m = Margin::default();
        // Lateness uniform over 0..200 µs: its 99th percentile is 198 µs.
        for i in 0..20_000u64 {
            m.learn(Duration::from_micros((i * 37) % 200));
        }
        assert!(m.late.get().abs_diff(Duration::from_micros(198)) < Duration::from_micros(15), "{:?}", m.get());
        // One very late wake-up moves it by one step, not to the ceiling.
        let before = m.late.get();
        m.learn(Duration::from_secs(1));
        assert!(m.late.get() - before <= QUANTILE_STEP * 99, "{:?}", m.late.get());
        for _ in 0..100_000 {
            m.learn(Duration::ZERO);
        }
        assert_eq!(m.get(), MIN_MARGIN);
    }

    #[test]
    fn sends_closer_than_the_lateness_spin_half_their_gap() {
        let m = Margin::default();
        let start = Instant::now();
        for i in 0..100u32 {
            m.note_due(start + Duration::from_micros(100) * i);
        }
        // Lateness 200 µs, sends 100 µs apart: spin 50 µs before each.
        assert_eq!(m.get(), Duration::from_micros(50));
        let slow = Margin::default();
        for i in 0..100u32 {
            slow.note_due(start + Duration::from_millis(10) * i);
        }
        assert_eq!(slow.get(), Duration::from_micros(200));
    }

    #[test]
    fn sends_closer_than_a_sixth_of_the_lateness_share_wake_ups() {
        let m = Margin::default();
        let start = Instant::now();
        let at = |us: u64| start + Duration::from_micros(us);
        // Lateness 200 µs, sends 100 µs apart: each waited for alone.
        for i in 0..100 {
            m.note_due(at(100 * i));
        }
        assert_eq!(m.wait_for(at(10_000)), Wait::Precise { wake: at(10_000 - 50) });
        // Sends 30 µs apart (6.7 per lateness): the first opens a group that wakes one
        // lateness later; the next ones join it until a due time past that wake-up opens the next.
        for i in 0..100 {
            m.note_due(at(20_000 + 30 * i));
        }
        assert_eq!(m.wait_for(at(30_000)), Wait::Grouped { wake: at(30_200) });
        assert_eq!(m.wait_for(at(30_030)), Wait::Grouped { wake: at(30_200) });
        assert_eq!(m.wait_for(at(30_200)), Wait::Grouped { wake: at(30_200) });
        assert_eq!(m.wait_for(at(30_230)), Wait::Grouped { wake: at(30_430) });
        // Sends 50 µs apart (4 per lateness): below GROUP_AT but not GROUP_UNTIL, still grouped...
        for i in 0..100 {
            m.note_due(at(40_000 + 50 * i));
        }
        assert!(matches!(m.wait_for(at(50_000)), Wait::Grouped { .. }));
        // ...and one by one again at 100 µs apart.
        for i in 0..100 {
            m.note_due(at(60_000 + 100 * i));
        }
        assert!(matches!(m.wait_for(at(80_000)), Wait::Precise { .. }));
    }
}
