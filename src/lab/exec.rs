//! The two execution models of test_service (docs/experiments.md, "Threaded vs async
//! servers"), behind one admission path. Both run at most a fixed number of calls at once,
//! queue at most `queue` more, and refuse the rest at once.
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore, SemaphorePermit};

/// Refused by admission control: everything runs and the queue is full.
#[derive(Debug, PartialEq, Eq)]
pub struct Busy;

/// The call panicked on a worker thread.
#[derive(Debug, PartialEq, Eq)]
pub struct Panicked;

type Job = Box<dyn FnOnce() + Send>;

pub enum Executor {
    /// Calls run as tasks on the server's runtime (test_service's fibers): a CPU-bound
    /// call monopolises its runtime thread, an I/O-bound one yields while it waits.
    Async {
        /// running + queue permits: taken without waiting, or the call is refused.
        admitted: Semaphore,
        /// running permits: the queue is the wait for one of these.
        running: Semaphore,
    },
    /// Calls run one at a time to completion on each of N OS threads, blocking included.
    Threaded {
        /// threads + queue permits, as in the async model: taken without waiting, or the
        /// call is refused. A permit travels with its job and is given back just before the
        /// reply is sent, so a client that calls again on receiving it finds it free.
        admitted: Arc<Semaphore>,
        /// Unbounded: the permits bound it.
        jobs: crossbeam_channel::Sender<Job>,
        /// Drives a call's future on the worker thread that took it.
        runtime: Handle,
    },
}

impl Executor {
    pub fn new_async(running: usize, queue: usize) -> Executor {
        Executor::Async { admitted: Semaphore::new(running + queue), running: Semaphore::new(running) }
    }

    /// Starts `threads` worker threads; they end when the executor is dropped.
    pub fn new_threaded(threads: usize, queue: usize, runtime: Handle) -> std::io::Result<Executor> {
        // Admission is the semaphore's, not the channel's: a bounded channel would count a job
        // handed to an idle worker as queued until that worker takes it, and a zero-capacity
        // one would refuse a call while its worker is between sending a reply and taking the
        // next job.
        let admitted = Arc::new(Semaphore::new(threads + queue));
        let (jobs, queued) = crossbeam_channel::unbounded::<Job>();
        for i in 0..threads {
            let queued = queued.clone();
            std::thread::Builder::new().name(format!("rpcmeter-worker-{i}")).spawn(move || {
                for job in queued {
                    // A panicking call fails alone (its reply channel drops); the worker lives on.
                    let _ = catch_unwind(AssertUnwindSafe(job));
                }
            })?;
        }
        Ok(Executor::Threaded { admitted, jobs, runtime })
    }

    /// Admits one call, or refuses it at once.
    pub fn admit(&self) -> Result<Admission<'_>, Busy> {
        match self {
            Executor::Async { admitted, running } => {
                Ok(Admission::Async { _admitted: admitted.try_acquire().map_err(|_| Busy)?, running })
            }
            Executor::Threaded { admitted, jobs, runtime } => {
                let permit = admitted.clone().try_acquire_owned().map_err(|_| Busy)?;
                Ok(Admission::Threaded { permit, jobs, runtime })
            }
        }
    }
}

/// An admitted call's place: it holds its admission permit until the call's work has ended.
pub enum Admission<'a> {
    Async { _admitted: SemaphorePermit<'a>, running: &'a Semaphore },
    Threaded { permit: OwnedSemaphorePermit, jobs: &'a crossbeam_channel::Sender<Job>, runtime: &'a Handle },
}

impl Admission<'_> {
    /// Runs `work`, after waiting in the queue for a free slot.
    pub async fn run<F>(self, work: F) -> Result<F::Output, Panicked>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self {
            Admission::Async { _admitted, running } => {
                let _running = running.acquire().await.expect("the run semaphore is never closed");
                Ok(work.await)
            }
            Admission::Threaded { permit, jobs, runtime } => {
                let (reply, answer) = oneshot::channel();
                let runtime = runtime.clone();
                let job: Job = Box::new(move || {
                    // The client went away while the call was queued: its work is not started.
                    if reply.is_closed() {
                        return;
                    }
                    let output = runtime.block_on(work);
                    // Free before the reply goes: a client that calls again on receiving it
                    // finds the slot free. The output, undelivered, is dropped here.
                    drop(permit);
                    let _ = reply.send(output);
                });
                // Fails only when no worker is left, which catch_unwind prevents.
                jobs.send(job).map_err(|_| Panicked)?;
                // Here, the worker drops the reply unsent only when the call panicked.
                answer.await.map_err(|_| Panicked)
            }
        }
    }
}
