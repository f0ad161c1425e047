//! SIGINT/SIGTERM: a stop flag the loop and every wait check, and the signal that set it.
//! SIGHUP: the outputs are opened anew at the next snapshot (logrotate's `postrotate kill
//! -HUP`), and the run goes on.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static REOPEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_hangup(_: libc::c_int) {
    REOPEN.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set the stop flag (no SA_RESTART: a blocked poll returns at once); SIGHUP
/// asks for a reopen (SA_RESTART: it interrupts nothing the run waits on but a poll).
pub(crate) fn install_signal_handlers() {
    // SAFETY: sigaction with handlers that only store to atomics (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        sa.sa_sigaction = on_hangup as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut());
    }
}

/// Whether a SIGHUP came since the last call.
pub(crate) fn take_reopen() -> bool {
    REOPEN.swap(false, Ordering::SeqCst)
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
