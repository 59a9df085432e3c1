//! Waiting on the event a test orders its steps by (a count reached, a line printed, a file
//! written) instead of sleeping for a guess at how long it takes: a busy machine makes any
//! guess too short. Each wait has a generous limit and fails the test with what it saw.
#![allow(dead_code)] // included whole by test files that use part of it
use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Long enough for a start on a machine with every core taken; short of a hung suite.
pub const LIMIT: Duration = Duration::from_secs(60);

/// Polls `check` until it gives `Ok`; after `limit`, fails the test naming `what` and the
/// last `Err` (what was seen instead).
pub fn wait_for<T, E: std::fmt::Debug>(what: &str, limit: Duration, mut check: impl FnMut() -> Result<T, E>) -> T {
    let start = Instant::now();
    loop {
        match check() {
            Ok(done) => return done,
            Err(seen) if start.elapsed() >= limit => panic!("waited {limit:?} for {what}; last seen: {seen:?}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Waits until `count()` reaches `at_least`.
pub fn wait_for_count(what: &str, at_least: u64, mut count: impl FnMut() -> u64) -> u64 {
    wait_for(what, LIMIT, || {
        let n = count();
        if n >= at_least {
            Ok(n)
        } else {
            Err(n)
        }
    })
}

/// A child's output read line by line on a thread of its own, so that a test can wait for a
/// line with a limit and still have the whole text at the end.
pub struct Lines {
    seen: Vec<String>,
    lines: Receiver<String>,
}

impl Lines {
    /// Reads `from` (a child's stderr or stdout taken from it) until its end.
    pub fn read(from: impl Read + Send + 'static) -> Lines {
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { seen: Vec::new(), lines }
    }

    /// Waits for a line containing `pattern`, returning it; fails the test with the lines so far
    /// when the output ends or `LIMIT` passes first.
    pub fn wait_for_line(&mut self, pattern: &str) -> String {
        let start = Instant::now();
        loop {
            let left = LIMIT.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(pattern) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("waited {LIMIT:?} for a line with {pattern:?}; seen:\n{}", self.seen.join("\n"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the output ended without a line with {pattern:?}; seen:\n{}", self.seen.join("\n"))
                }
            }
        }
    }

    /// Every line, seen and still to come, once the output has ended.
    pub fn rest(mut self) -> String {
        self.seen.extend(self.lines.iter());
        self.seen.iter().map(|l| format!("{l}\n")).collect()
    }
}
