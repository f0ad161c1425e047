//! `/metrics` before a set runs, and which set runs once one does.
//!
//! With `--bundle` the agent may wait for a set (no vendor driver loaded yet, or none for this
//! kernel's series) and stays up, rechecking. The fleet must see such a host as a host without
//! probes, not as a dead target: the port is bound at start and serves why no set runs
//! (`probegen_set_running 0`, `probegen_no_set{reason}`). It is served from the agent's own
//! thread while it waits: a server thread started then would keep the capabilities the attach
//! needs after the agent drops them (capabilities are per thread). Once a set is chosen, the
//! same socket goes to the sink's thread ([`WaitingMetrics::into_sink`]): no scrape finds the
//! port closed between the two.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::server::Server;
use crate::{esc, Page, PageHandle, PrometheusSink};

/// Why no set of the bundle runs on this host now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSet {
    /// none of the bundle's vendor drivers is loaded (the NIC's driver not loaded yet)
    NoDriverLoaded,
    /// a vendor driver is loaded, but the bundle has no set of this kernel's series for it
    NoSetForKernel,
}

impl NoSet {
    fn label(self) -> &'static str {
        match self {
            NoSet::NoDriverLoaded => "no_driver_loaded",
            NoSet::NoSetForKernel => "no_set_for_kernel",
        }
    }
}

/// The set that runs: its bundle directory and how it was matched ("exact", "series").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningSet {
    pub dir: String,
    pub matched: &'static str,
}

/// The page while no set runs.
fn render_waiting(why: NoSet, kernel: &str) -> String {
    let mut o = String::new();
    render_running_gauge(&mut o, 0);
    let _ = writeln!(
        o,
        "# HELP probegen_no_set Why no probe set runs on this host (1 for the reason; the agent rechecks every interval).\n\
         # TYPE probegen_no_set gauge\n\
         probegen_no_set{{reason=\"{}\",kernel=\"{}\"}} 1",
        why.label(),
        esc(kernel)
    );
    o
}

fn render_running_gauge(o: &mut String, v: u8) {
    let _ = writeln!(
        o,
        "# HELP probegen_set_running 1 while a probe set of the bundle is attached on this host, 0 while the agent waits for one.\n\
         # TYPE probegen_set_running gauge\n\
         probegen_set_running {v}"
    );
}

/// Appended to the page of a run chosen from a bundle.
pub(crate) fn render_running(o: &mut String, set: &RunningSet) {
    render_running_gauge(o, 1);
    let _ = writeln!(
        o,
        "# HELP probegen_set_info The bundle's set this host runs (match: exact release or the newest of its series).\n\
         # TYPE probegen_set_info gauge\n\
         probegen_set_info{{set=\"{}\",match=\"{}\"}} 1",
        esc(&set.dir),
        set.matched
    );
}

/// `/metrics` bound, served from the caller's thread while it waits for a set.
pub struct WaitingMetrics {
    server: Server,
    page: PageHandle,
    addr: SocketAddr,
}

impl WaitingMetrics {
    /// Binds `addr`; until [`WaitingMetrics::serve_for`] a scrape waits in the backlog.
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let page: PageHandle = Arc::new(Mutex::new(Page::Text(String::new())));
        let shared = page.clone();
        let server = Server::bind(
            addr,
            Box::new(move || shared.lock().map(|p| p.body()).unwrap_or_default()),
        )?;
        let addr = server.local_addr()?;
        Ok(WaitingMetrics { server, page, addr })
    }

    /// The bound address (an ephemeral port resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves the page saying why no set runs for `wait`, from this thread.
    pub fn serve_for(&mut self, why: NoSet, kernel: &str, wait: Duration) {
        if let Ok(mut page) = self.page.lock() {
            *page = Page::Text(render_waiting(why, kernel));
        }
        self.server.serve_until(Some(Instant::now() + wait));
    }

    /// The sink of the run that found a set, on the same socket, served from its own thread
    /// from now on (start it after the capabilities are dropped).
    pub fn into_sink(self, set: RunningSet) -> std::io::Result<PrometheusSink> {
        let sink = PrometheusSink {
            page: self.page,
            addr: self.addr,
        };
        sink.set(|s| s.set = Some(set));
        self.server.spawn()?;
        Ok(sink)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::*;

    fn scrape(addr: SocketAddr) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).expect("connect");
            c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").expect("send");
            let mut s = String::new();
            let _ = c.read_to_string(&mut s);
            s
        })
    }

    #[test]
    fn serves_why_no_set_runs_then_the_running_set_on_the_same_port() {
        let mut w = WaitingMetrics::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let addr = w.addr();
        let client = scrape(addr);
        w.serve_for(NoSet::NoSetForKernel, "6.13.4", Duration::from_millis(300));
        let page = client.join().expect("client");
        assert!(
            page.starts_with("HTTP/1.0 200") || page.starts_with("HTTP/1.1 200"),
            "{page}"
        );
        assert!(page.contains("probegen_set_running 0\n"), "{page}");
        assert!(
            page.contains("probegen_no_set{reason=\"no_set_for_kernel\",kernel=\"6.13.4\"} 1\n"),
            "{page}"
        );
        let sink = w
            .into_sink(RunningSet {
                dir: "linux-6.12/rxe".into(),
                matched: "series",
            })
            .expect("sink");
        assert_eq!(sink.addr(), addr);
        let page = scrape(addr).join().expect("client");
        assert!(page.contains("probegen_set_running 1\n"), "{page}");
        assert!(
            page.contains("probegen_set_info{set=\"linux-6.12/rxe\",match=\"series\"} 1\n"),
            "{page}"
        );
        assert!(!page.contains("probegen_no_set"), "{page}");
    }
}
