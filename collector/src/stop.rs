//! SIGINT/SIGTERM: a stop flag the loop and every wait check, and the signal that set it.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set the stop flag (no SA_RESTART: a blocked poll returns at once).
pub(crate) fn install_signal_handlers() {
    // SAFETY: sigaction with a handler that only stores to atomics (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

pub(crate) fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Asks the running loop to stop, as a signal would (tests, embedding).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// The signal that stopped the run, if one did.
pub(crate) fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
