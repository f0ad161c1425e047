//! `PROBEGEN_COLLECT_TIMINGS=1`: the cost of each step of the collection loop, one stderr
//! line per window (wall time and this thread's CPU time per step, summed over the loop's
//! turns within the window). Off by default; when off a step mark is one load of a flag.
//!
//! The loop marks the end of each step with [`mark`]; [`report`] prints the window's line
//! after its snapshot was written. A leaf module: any stage may mark.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that turns the timings on (`1`).
pub(crate) const TIMINGS_ENV: &str = "PROBEGEN_COLLECT_TIMINGS";

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(TIMINGS_ENV).is_ok_and(|v| v == "1"))
}

/// This thread's CPU time (user + system).
fn thread_cpu() -> Duration {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The time of clock `id` (zero if it cannot be read).
fn read_clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// One step's wall and CPU time within a window.
struct Step {
    name: &'static str,
    wall: Duration,
    cpu: Duration,
}

/// The steps of the current window, in the order first seen.
struct StepClock {
    wall: Instant,
    cpu: Duration,
    steps: Vec<Step>,
}

thread_local! {
    static CLOCK: RefCell<Option<StepClock>> = const { RefCell::new(None) };
}

/// Ends step `name` here: the time since the previous mark counts for it.
pub(crate) fn mark(name: &'static str) {
    if !enabled() {
        return;
    }
    let (wall, cpu) = (Instant::now(), thread_cpu());
    CLOCK.with(|c| {
        let mut c = c.borrow_mut();
        let Some(clock) = c.as_mut() else {
            *c = Some(StepClock {
                wall,
                cpu,
                steps: Vec::new(),
            });
            return;
        };
        let (dw, dc) = (wall - clock.wall, cpu.saturating_sub(clock.cpu));
        (clock.wall, clock.cpu) = (wall, cpu);
        match clock.steps.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                s.wall += dw;
                s.cpu += dc;
            }
            None => clock.steps.push(Step {
                name,
                wall: dw,
                cpu: dc,
            }),
        }
    });
}

/// Prints window `window`'s steps (`name wall/cpu` in ms, the time on CLOCK_MONOTONIC, which
/// /proc/uptime shows too) and starts the next window.
pub(crate) fn report(window: u64) {
    if !enabled() {
        return;
    }
    mark("report");
    let line = CLOCK.with(|c| {
        let mut c = c.borrow_mut();
        let clock = c.as_mut()?;
        // CLOCK_MONOTONIC: /proc/uptime's clock, to line the windows up with other records
        let at = read_clock(libc::CLOCK_MONOTONIC).as_secs_f64();
        let mut line =
            format!("probegen collect: timings window {window} at {at:.3} s (ms wall/cpu):");
        let (mut wall, mut cpu) = (Duration::ZERO, Duration::ZERO);
        for s in clock.steps.drain(..) {
            let _ = write!(line, " {} {}/{}", s.name, ms(s.wall), ms(s.cpu));
            wall += s.wall;
            cpu += s.cpu;
        }
        let _ = write!(line, "; total {}/{}", ms(wall), ms(cpu));
        Some(line)
    });
    if let Some(line) = line {
        eprintln!("{line}");
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}
