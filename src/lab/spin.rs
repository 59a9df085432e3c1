//! Busy-polling a network thread between echo calls (`serve --spin`; docs/design.md,
//! "Spinning between echo calls", has the numbers).
//!
//! A network thread that answers echo and then sleeps in `epoll_wait` must be woken for the
//! client's next requests, and on a VM that wake-up (an idle vCPU's interrupt, the scheduler's
//! switch back) is dear: with h2load at 8 streams on one connection, a profile put 35% of
//! `serve`'s samples in the sleep and wake-up paths, while neither process was short of
//! CPU (they took turns). So for `window` after an echo
//! arrived, the thread stays awake: it gives way to any other runnable thread
//! (`sched_yield`) and asks tokio's driver for I/O without blocking (`yield_now` makes the
//! current-thread runtime poll with a zero timeout), and parks as before only once no echo
//! has come for `window`. grpc-go's runtime spins the same way before it parks its threads.
//!
//! The price is CPU: while echo traffic lasts, the thread takes its core, and that is counted
//! in the server's CPU (Stats, `run`'s server line). Only echo's fast path starts the spin:
//! calls handed to the execution model (Cpu, Db, ...) do not, so the threaded-vs-async
//! experiment's CPU is the model's alone. `--spin 0` turns it off.
//!
//! Everything here is thread-local: a network thread's runtime is current-thread, and the
//! fast path is answered on the thread that read the request.
use std::cell::Cell;
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

thread_local! {
    /// Echo calls that arrived on this thread.
    static ARRIVALS: Cell<u64> = const { Cell::new(0) };
    /// The spinner's waker while it is parked (no echo for a window).
    static PARKED: Cell<Option<Waker>> = const { Cell::new(None) };
}

/// An echo call arrived on this network thread: spin for the next window.
pub fn echo_arrived() {
    ARRIVALS.with(|a| a.set(a.get() + 1));
    if let Some(spinner) = PARKED.with(Cell::take) {
        spinner.wake();
    }
}

/// Runs as a task of the network thread's runtime, for as long as it serves; returns at once
/// when `window` is zero.
pub async fn between_echo_calls(window: Duration) {
    if window.is_zero() {
        return;
    }
    let arrivals = || ARRIVALS.with(Cell::get);
    let mut seen = arrivals();
    let mut last = Instant::now();
    loop {
        let now = arrivals();
        if now != seen {
            seen = now;
            last = Instant::now();
        } else if last.elapsed() >= window {
            // Parked until the next echo; its arrival restarts the window.
            poll_fn(|cx| {
                if arrivals() != seen {
                    return Poll::Ready(());
                }
                PARKED.with(|p| p.set(Some(cx.waker().clone())));
                Poll::Pending
            })
            .await;
            continue;
        }
        std::thread::yield_now();
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked() -> bool {
        PARKED.with(|p| {
            let waker = p.take();
            let parked = waker.is_some();
            p.set(waker);
            parked
        })
    }

    /// Within the window after an echo the spinner stays runnable; after it, it parks.
    #[test]
    fn spins_for_the_window_after_an_echo_then_parks() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let window = Duration::from_millis(30);
            let spinner = tokio::spawn(between_echo_calls(window));
            tokio::time::sleep(window * 2).await;
            assert!(parked(), "no echo for two windows, yet not parked");
            echo_arrived();
            let start = Instant::now();
            while start.elapsed() < window / 2 {
                tokio::task::yield_now().await;
                assert!(!parked(), "parked within the window after an echo");
            }
            tokio::time::sleep(window * 2).await;
            assert!(parked(), "still spinning two windows after the last echo");
            spinner.abort();
        });
    }

    #[test]
    fn a_zero_window_never_spins() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(between_echo_calls(Duration::ZERO));
    }
}
