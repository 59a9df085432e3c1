//! The system calls rpcmeter makes itself, in one place, each through rustix (no unsafe code
//! then); getrusage(2), which rustix does not wrap, is replaced by the process CPU-time clock
//! and /proc/self/status. Linux only, as the timerfd and prctl(2) are.
use std::os::fd::OwnedFd;
use std::process::{Child, Command};
use std::time::Duration;

/// Asks the kernel to fire this thread's timers on time: by default it may defer a normal
/// thread's timer by up to 50 µs to batch wake-ups (timer slack, prctl(2) PR_SET_TIMERSLACK),
/// a delay every paced send would inherit. Best effort: a refusal leaves the default.
pub fn no_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}

/// A non-blocking timerfd on the monotonic clock, or None when the kernel refuses one.
pub fn timerfd() -> Option<OwnedFd> {
    use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
    timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC).ok()
}

/// Arms the timerfd once, `after` from now; false when the kernel refuses the time.
pub fn arm_timerfd(fd: &OwnedFd, after: Duration) -> bool {
    use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
    let spec = Itimerspec {
        it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: Timespec {
            tv_sec: after.as_secs().min(i64::MAX as u64) as _,
            // A zero value would disarm the timer: at least 1 ns.
            tv_nsec: after.subsec_nanos().max(if after.as_secs() == 0 { 1 } else { 0 }) as _,
        },
    };
    timerfd_settime(fd, TimerfdTimerFlags::empty(), &spec).is_ok()
}

/// Sends `signal` (SIGINT, SIGTERM, SIGKILL...) to `child`, which must not have been waited
/// for (its pid is still its own). Best effort: a child that has already exited is no error.
pub fn signal(child: &Child, signal: i32) {
    use rustix::process::{kill_process, Pid, Signal};
    let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
    if let (Some(pid), Some(signal)) = (pid, Signal::from_named_raw(signal)) {
        let _ = kill_process(pid, signal);
    }
}

/// The child `command` starts gets SIGTERM from the kernel when this process dies, even by
/// SIGKILL (prctl(2) PR_SET_PDEATHSIG); it does not start when this process is already gone.
pub fn ended_with_parent(command: &mut Command) {
    death_signal(command, rustix::process::Signal::TERM);
}

/// As `ended_with_parent`, with SIGKILL: the child cannot outlive this process at all.
pub fn killed_with_parent(command: &mut Command) {
    death_signal(command, rustix::process::Signal::KILL);
}

fn death_signal(command: &mut Command, signal: rustix::process::Signal) {
    use rustix::process::{getpid, getppid, set_parent_process_death_signal};
    use std::os::unix::process::CommandExt;
    let parent = getpid();
    // Unsafe by necessity: std's Command sets no death signal, and its `pre_exec`, the only
    // hook that runs in the child before exec, is unsafe with no safe counterpart.
    // SAFETY: between fork and exec only async-signal-safe calls may run, and nothing may
    // allocate: these are two raw system calls and an integer comparison. The death signal
    // comes when the thread that forked ends: the caller's, which lives as long as the process.
    unsafe {
        command.pre_exec(move || {
            set_parent_process_death_signal(Some(signal))?;
            // The parent died before prctl: the kernel will not tell, so do not start.
            if getppid() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(rustix::io::Errno::SRCH.raw_os_error()));
            }
            Ok(())
        });
    }
}

/// This process's CPU time (user and system, every thread's, ended ones included: the
/// process CPU-time clock) and its peak resident set size in bytes (VmHWM, which
/// getrusage(2) reports as ru_maxrss; 0 when /proc cannot be read).
pub fn cpu_and_max_rss() -> (Duration, u64) {
    use rustix::time::{clock_gettime, ClockId};
    let cpu = clock_gettime(ClockId::ProcessCPUTime);
    let cpu = Duration::new(cpu.tv_sec.max(0) as u64, cpu.tv_nsec.clamp(0, 999_999_999) as u32);
    (cpu, peak_rss().unwrap_or(0))
}

/// VmHWM of /proc/self/status, in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status.lines().find_map(|line| line.strip_prefix("VmHWM:"))?.trim().strip_suffix("kB")?;
    Some(kib.trim().parse::<u64>().ok()? * 1024)
}

/// The size of a memory page, in bytes.
pub fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// Whether this process runs as root (network namespaces need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// This machine's host name and kernel release, from uname(2).
pub fn host_and_kernel() -> (String, String) {
    let u = rustix::system::uname();
    (u.nodename().to_string_lossy().into_owned(), u.release().to_string_lossy().into_owned())
}
