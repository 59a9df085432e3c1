//! The two execution models of seed 002, behind one admission path. Both run at most a
//! fixed number of calls at once, queue at most `queue` more, and refuse the rest at once.
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::{oneshot, Semaphore};

/// Why a call produced no answer.
#[derive(Debug, PartialEq, Eq)]
pub enum NotRun {
    /// Refused by admission control: everything runs and the queue is full.
    Busy,
    /// The call panicked on a worker thread.
    Panicked,
}

type Job = Box<dyn FnOnce() + Send>;

pub enum Executor {
    /// Calls run as tasks on the server's runtime (the fibers of the seed): a CPU-bound
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

    /// Runs `work` under admission control, or refuses it at once.
    pub async fn run<F>(&self, work: F) -> Result<F::Output, NotRun>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self {
            Executor::Async { admitted, running } => {
                let _admitted = admitted.try_acquire().map_err(|_| NotRun::Busy)?;
                let _running = running.acquire().await.expect("the run semaphore is never closed");
                Ok(work.await)
            }
            Executor::Threaded { admitted, jobs, runtime } => {
                let permit = admitted.clone().try_acquire_owned().map_err(|_| NotRun::Busy)?;
                let (reply, answer) = oneshot::channel();
                let runtime = runtime.clone();
                let job: Job = Box::new(move || {
                    let output = runtime.block_on(work);
                    drop(permit);
                    let _ = reply.send(output);
                });
                // Fails only when no worker is left, which catch_unwind prevents.
                jobs.send(job).map_err(|_| NotRun::Panicked)?;
                // The worker drops the reply unsent only when the call panicked.
                answer.await.map_err(|_| NotRun::Panicked)
            }
        }
    }
}
