//! The system calls rpcmeter makes itself, in one place: each is small, documented, and
//! the only unsafe code of its kind.

/// Asks the kernel to fire this thread's timers on time: by default it may defer a normal
/// thread's timer by up to 50 µs to batch wake-ups (timer slack, prctl(2) PR_SET_TIMERSLACK),
/// a delay every paced send would inherit.
pub fn no_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}
