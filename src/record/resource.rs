//! The process's own cost: CPU seconds (user + system) and memory, read from the kernel.
//! Both `run` (the client's cost) and the lab's Stats (the server's cost) use this.
use std::time::Duration;

/// One reading of this process's resource use.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User + system CPU time consumed by all threads so far.
    pub cpu: Duration,
    /// Peak resident set size so far, in bytes.
    pub max_rss_bytes: u64,
    /// Resident set size now, in bytes.
    pub rss_bytes: u64,
}

/// Reads the process's CPU time and memory now.
pub fn usage() -> Usage {
    let (cpu, max_rss) = crate::sys::cpu_and_max_rss();
    Usage {
        cpu,
        // Not ru_maxrss: Linux carries it over exec, so under `cargo run` it would report
        // cargo's peak. VmHWM belongs to this program's own address space.
        max_rss_bytes: status_kib("self", "VmHWM:").map_or(max_rss, |kib| kib * 1024),
        rss_bytes: current_rss_bytes(),
    }
}

/// A `kB` line of /proc/PROCESS/status ("self" or a pid), e.g. "VmHWM:".
fn status_kib(process: &str, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().next()?.parse().ok()
}

/// The resident set of another process now (a lab's server); None when it has ended.
pub fn rss_bytes_of(pid: u32) -> Option<u64> {
    Some(status_kib(&pid.to_string(), "VmRSS:")? * 1024)
}

/// Memory the system can still give without swapping (MemAvailable), when the kernel says.
pub fn memory_available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 =
        info.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// Resident set size now, from /proc/self/statm (0 where that file is absent).
fn current_rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * crate::sys::page_size()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_of_this_process_is_read_by_pid_and_of_no_process_is_none() {
        assert!(rss_bytes_of(std::process::id()).unwrap() > 1 << 20);
        assert!(rss_bytes_of(u32::MAX).is_none());
    }

    #[test]
    fn cpu_time_grows_with_work_and_rss_is_read() {
        let before = usage();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let after = usage();
        assert!(after.cpu > before.cpu, "CPU time did not advance: {before:?} -> {after:?}");
        assert!(after.rss_bytes > 1 << 20, "RSS below 1 MiB is not a real reading: {after:?}");
        assert!(after.max_rss_bytes >= after.rss_bytes / 2);
    }
}
