//! The `/metrics` HTTP server: one thread, one `poll(2)` loop over non-blocking sockets, so a
//! client that is slow (a byte every few seconds, or one that never reads its answer) holds
//! one slot, never the thread: every other client is served while it waits.
//!
//! Bounds, so that no client can stall the others or grow memory:
//! * each connection has a deadline covering the whole request: its head must arrive within
//!   [`REQUEST_DEADLINE`] of the accept, its answer be taken within [`ANSWER_DEADLINE`] after
//!   that; past it the connection is closed, whatever it is doing;
//! * a request head larger than [`MAX_REQUEST_BYTES`] is refused (`431`) and closed;
//! * at most [`MAX_CONNECTIONS`] connections are open; a new one closes the oldest (a scrape
//!   sends its request at once and is answered in the same turn of the loop, so only a client
//!   that holds a connection without finishing its request loses it).
//!
//! Memory is at most `MAX_CONNECTIONS` x (request cap + one page). Errors of one connection
//! are not logged (a hostile client must not write the agent's log); accept errors are, at
//! most once a minute.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The head (request line and headers) of a request must arrive within this of the accept.
pub(crate) const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// The answer must be taken by the client within this once the request is complete.
pub(crate) const ANSWER_DEADLINE: Duration = Duration::from_secs(5);
/// Largest request head accepted (a scrape's is a few hundred bytes).
pub(crate) const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// After an accept error (no file descriptor left), the listener rests this long: it stays
/// readable, and polling it again at once would spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What the server answers `GET /metrics` with (rendered when asked).
pub(crate) type RenderPage = Box<dyn Fn() -> String + Send>;

/// Binds `addr` and serves from a background thread; returns the bound address.
pub(crate) fn serve(addr: SocketAddr, page: RenderPage) -> std::io::Result<SocketAddr> {
    let server = Server::bind(addr, page)?;
    let local = server.local_addr()?;
    server.spawn()?;
    Ok(local)
}

enum Phase {
    /// the request head so far (at most MAX_REQUEST_BYTES)
    Reading(Vec<u8>),
    /// the whole answer, and how much of it the client took
    Writing { answer: Vec<u8>, sent: usize },
}

struct Connection {
    stream: TcpStream,
    /// closed when reached, whatever the phase
    deadline: Instant,
    phase: Phase,
}

/// What one turn did to a connection.
#[derive(PartialEq, Eq)]
enum Turn {
    Open,
    Closed,
}

pub(crate) struct Server {
    listener: TcpListener,
    page: RenderPage,
    /// in accept order: the first is the oldest
    connections: Vec<Connection>,
    /// the listener is not polled before this (after an accept error)
    accept_paused_until: Option<Instant>,
    last_accept_error_log: Option<Instant>,
}

impl Server {
    /// Binds `addr`; nothing is served until [`Server::serve_until`] or [`Server::spawn`].
    pub(crate) fn bind(addr: SocketAddr, page: RenderPage) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            page,
            connections: Vec::with_capacity(MAX_CONNECTIONS),
            accept_paused_until: None,
            last_accept_error_log: None,
        })
    }

    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves from a thread of its own from now on (with the connections already open).
    pub(crate) fn spawn(mut self) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("probegen-metrics".into())
            .spawn(move || self.serve_until(None))
            .map(drop)
    }

    /// Serves from the calling thread until `deadline` (forever with `None`).
    pub(crate) fn serve_until(&mut self, deadline: Option<Instant>) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(MAX_CONNECTIONS + 1);
        loop {
            let now = Instant::now();
            if deadline.is_some_and(|d| d <= now) {
                return;
            }
            self.connections.retain(|c| c.deadline > now);
            if self.accept_paused_until.is_some_and(|t| t <= now) {
                self.accept_paused_until = None;
            }
            fds.clear();
            // a paused listener is polled as fd -1: poll(2) ignores it
            let listen_fd = match self.accept_paused_until {
                None => self.listener.as_raw_fd(),
                Some(_) => -1,
            };
            fds.push(pollfd(listen_fd, libc::POLLIN));
            for c in &self.connections {
                let events = match c.phase {
                    Phase::Reading(_) => libc::POLLIN,
                    Phase::Writing { .. } => libc::POLLOUT,
                };
                fds.push(pollfd(c.stream.as_raw_fd(), events));
            }
            let wake = self
                .connections
                .iter()
                .map(|c| c.deadline)
                .chain(self.accept_paused_until)
                .chain(deadline)
                .min();
            let timeout_ms = wake.map_or(-1, |t| {
                // rounded up: waking before the deadline would only loop once more
                let ms = t.saturating_duration_since(now).as_micros().div_ceil(1000);
                i32::try_from(ms).unwrap_or(i32::MAX)
            });
            let nfds = libc::nfds_t::try_from(fds.len()).unwrap_or(libc::nfds_t::MAX);
            // SAFETY: `fds` is a live, initialised array of `nfds` pollfd structures.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), nfds, timeout_ms) };
            if n < 0 {
                // EINTR (a signal for the collector's thread landed here): poll again; anything
                // else cannot be fixed by this thread, so it rests instead of spinning
                if std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                    std::thread::sleep(ACCEPT_PAUSE);
                }
                continue;
            }
            self.serve_ready(&fds[1..]);
            if fds[0].revents != 0 {
                self.accept();
            }
        }
    }

    /// One turn for each connection poll(2) found ready (`ready[i]` is `connections[i]`'s).
    fn serve_ready(&mut self, ready: &[libc::pollfd]) {
        let mut i = 0;
        self.connections.retain_mut(|c| {
            let r = ready.get(i).map_or(0, |p| p.revents);
            i += 1;
            r == 0 || c.turn(&self.page) == Turn::Open
        });
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.connections.len() >= MAX_CONNECTIONS {
                        // the oldest has had the longest to finish its request
                        self.connections.remove(0);
                    }
                    self.connections.push(Connection {
                        stream,
                        deadline: Instant::now() + REQUEST_DEADLINE,
                        phase: Phase::Reading(Vec::new()),
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let now = Instant::now();
                    if self
                        .last_accept_error_log
                        .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(60))
                    {
                        eprintln!("probegen collect: metrics: accept: {e} (logged once a minute)");
                        self.last_accept_error_log = Some(now);
                    }
                    self.accept_paused_until = Some(now + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }
}

fn pollfd(fd: i32, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

impl Connection {
    /// Reads what arrived, or writes what the client can take; `Closed` when done or broken.
    fn turn(&mut self, page: &RenderPage) -> Turn {
        if let Phase::Reading(head) = &mut self.phase {
            let mut chunk = [0u8; 2048];
            loop {
                match self.stream.read(&mut chunk) {
                    // the client went away before its request was complete
                    Ok(0) => return Turn::Closed,
                    Ok(n) => {
                        // bytes past the cap are never kept
                        let room = MAX_REQUEST_BYTES - head.len();
                        head.extend_from_slice(&chunk[..n.min(room)]);
                        if let Some(answer) = answer_for(head, page) {
                            self.phase = Phase::Writing { answer, sent: 0 };
                            self.deadline = Instant::now() + ANSWER_DEADLINE;
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Turn::Open,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Turn::Closed,
                }
            }
        }
        let Phase::Writing { answer, sent } = &mut self.phase else {
            return Turn::Open;
        };
        while *sent < answer.len() {
            match self.stream.write(&answer[*sent..]) {
                Ok(0) => return Turn::Closed,
                Ok(n) => *sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Turn::Open,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Turn::Closed,
            }
        }
        // the answer is out: end the stream (Connection: close) rather than wait for the peer
        let _ = self.stream.shutdown(Shutdown::Write);
        Turn::Closed
    }
}

/// The whole answer once `head` holds a complete request head (or hit the cap); None while
/// more is needed.
fn answer_for(head: &[u8], page: &RenderPage) -> Option<Vec<u8>> {
    let complete = head.windows(4).any(|w| w == b"\r\n\r\n");
    if !complete && head.len() < MAX_REQUEST_BYTES {
        return None;
    }
    if !complete {
        return Some(answer(
            "431 Request Header Fields Too Large",
            "text/plain; charset=utf-8",
            b"request head too large\n",
            true,
        ));
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let with_body = method != "HEAD";
    Some(match (method, path) {
        ("GET" | "HEAD", "/metrics") => answer(
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            page().as_bytes(),
            with_body,
        ),
        ("GET" | "HEAD", "/") => answer(
            "200 OK",
            "text/plain; charset=utf-8",
            b"probegen collector: see /metrics\n",
            with_body,
        ),
        _ => answer(
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"not found\n",
            with_body,
        ),
    })
}

fn answer(status: &str, content_type: &str, body: &[u8], with_body: bool) -> Vec<u8> {
    let mut a = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        a.extend_from_slice(body);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(text: &'static str) -> SocketAddr {
        serve(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            Box::new(move || text.to_string()),
        )
        .expect("bind")
    }

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut c = TcpStream::connect(addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
        let mut r = String::new();
        c.read_to_string(&mut r).expect("read");
        r
    }

    #[test]
    fn answers_and_not_found() {
        let addr = server("m 1\n");
        let r = get(addr, "/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("text/plain; version=0.0.4"));
        assert!(r.ends_with("\r\n\r\nm 1\n"), "{r}");
        assert!(get(addr, "/nope").starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn a_silent_client_does_not_delay_a_scrape_and_is_closed_at_its_deadline() {
        let addr = server("m 1\n");
        let mut silent = TcpStream::connect(addr).expect("connect");
        silent.write_all(b"GET /met").expect("partial");
        let t0 = Instant::now();
        assert!(get(addr, "/metrics").contains("m 1"));
        assert!(t0.elapsed() < Duration::from_millis(500));
        silent
            .set_read_timeout(Some(REQUEST_DEADLINE * 2))
            .expect("timeout");
        let mut b = [0u8; 16];
        // closed by the server: end of stream (no answer to an unfinished request)
        assert_eq!(silent.read(&mut b).map_err(|e| e.kind()), Ok(0));
        assert!(t0.elapsed() < REQUEST_DEADLINE + Duration::from_millis(500));
    }

    #[test]
    fn an_oversized_head_is_refused() {
        let addr = server("m 1\n");
        let mut c = TcpStream::connect(addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let big = vec![b'a'; MAX_REQUEST_BYTES + 10];
        c.write_all(&big).expect("send");
        let mut r = Vec::new();
        let _ = c.read_to_end(&mut r);
        assert!(
            String::from_utf8_lossy(&r).starts_with("HTTP/1.1 431 "),
            "{}",
            String::from_utf8_lossy(&r)
        );
    }

    #[test]
    fn connections_past_the_limit_close_the_oldest() {
        let addr = server("m 1\n");
        let held: Vec<TcpStream> = (0..MAX_CONNECTIONS + 5)
            .map(|_| TcpStream::connect(addr).expect("connect"))
            .collect();
        assert!(get(addr, "/metrics").contains("m 1"));
        let mut first = &held[0];
        first
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        let mut b = [0u8; 4];
        assert_eq!(first.read(&mut b).map_err(|e| e.kind()), Ok(0));
    }
}
