//! The ClickHouse HTTP interface endpoint (`--clickhouse URL`) and one blocking HTTP/1.1 POST
//! over std's TcpStream: ClickHouse's HTTP API needs nothing more (a body, Basic credentials,
//! the status line), and the collector stays free of an HTTP stack.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::version::InsertMode;

/// The user name when the URL has none (a name is not a secret).
pub(crate) const USER_ENV: &str = "PROBEGEN_CLICKHOUSE_USER";
/// Once read for the password; now refused when set: the environment is no place for a
/// secret (inherited by every child, readable in /proc by the same user, dumped in reports).
pub(crate) const PASSWORD_ENV: &str = "PROBEGEN_CLICKHOUSE_PASSWORD";

/// Where and as whom to insert.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port` as given (for the Host header and messages)
    pub authority: String,
    pub user: String,
    pub password: String,
    pub database: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// insert into `<table>_buffer` (a Buffer table in front, `schema --buffer`) instead of
    /// the table itself
    pub buffered: bool,
}

impl std::fmt::Debug for Endpoint {
    // the password never reaches a log line
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "http://{}@{}/?database={}",
            self.user, self.authority, self.database
        )
    }
}

/// `s` percent-decoded; the error names `what` (never the text: it may be half a secret).
fn percent_decode(s: &str, what: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in {what}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{what} is not UTF-8 after decoding"))
}

/// The URL as messages show it: everything between the scheme and the last `@` (the
/// userinfo, where a password would be) replaced by `***`. Built before any message, and a
/// malformed URL is over-redacted rather than risk showing part of a secret.
fn redacted(url: &str) -> String {
    let Some((before, after)) = url.rsplit_once('@') else {
        return url.to_string();
    };
    match before.split_once("://") {
        Some((scheme, _)) if scheme.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            format!("{scheme}://***@{after}")
        }
        _ => format!("***@{after}"),
    }
}

impl Endpoint {
    /// `http://[user@]host[:port][/][?database=DB]`; the user defaults to
    /// `$PROBEGEN_CLICKHOUSE_USER` else `default`, the database to `probegen`, the port to
    /// 8123. No password: the caller sets it from a file or credential
    /// ([`crate::read_password`]); a URL carrying one, and `$PROBEGEN_CLICKHOUSE_PASSWORD`, are
    /// refused (argv and the environment are readable by others), and no message shows the
    /// URL's userinfo.
    pub fn parse(url: &str, timeout: Duration) -> Result<Self, crate::ClickhouseError> {
        if std::env::var_os(PASSWORD_ENV).is_some() {
            return Err(crate::ClickhouseError::PasswordInEnvironment {
                env: PASSWORD_ENV,
                credential: crate::PASSWORD_CREDENTIAL,
            });
        }
        let user = std::env::var(USER_ENV).ok().filter(|v| !v.is_empty());
        Self::parse_with(url, timeout, user, None).map_err(crate::ClickhouseError::Url)
    }

    /// The password (from a file or credential, never the URL).
    pub fn with_password(mut self, password: String) -> Self {
        self.password = password;
        self
    }

    /// `parse` with the environment's user and the password given.
    fn parse_with(
        url: &str,
        timeout: Duration,
        env_user: Option<String>,
        password: Option<String>,
    ) -> Result<Self, String> {
        let shown = redacted(url);
        let bad = |why: &str| format!("--clickhouse `{shown}`: {why}");
        // the userinfo comes off first: nothing after this reads it, so no message can echo it
        let (userinfo, url) = match url.rsplit_once('@') {
            Some((before, host)) => match before.split_once("://") {
                Some((scheme, u)) => (Some(u), format!("{scheme}://{host}")),
                None => return Err(bad("expected http://[user@]host[:port]")),
            },
            None => (None, url.to_string()),
        };
        // a raw `/`, `?` or `#` before the last `@`: not a user name (a mistyped URL)
        if userinfo.is_some_and(|u| u.contains(['/', '?', '#'])) {
            return Err(bad("expected http://[user@]host[:port][/?database=DB]"));
        }
        if userinfo.is_some_and(|u| u.contains(':')) {
            return Err(bad(
                "a password in the URL is refused (any local user can read the command line): \
                 put it in --clickhouse-password-file",
            ));
        }
        let rest = match url.split_once("://") {
            Some(("http", r)) => r,
            Some(("https", _)) => {
                return Err(bad(
                    "https is not supported (terminate TLS in a local proxy)",
                ))
            }
            Some((s, _)) => return Err(bad(&format!("scheme `{s}`: expected http"))),
            None => return Err(bad("expected http://host:port")),
        };
        let (hostpart, query) = match rest.split_once('?') {
            Some((h, q)) => (h, q),
            None => (rest, ""),
        };
        let authority = hostpart.trim_end_matches('/');
        if authority.contains('/') {
            return Err(bad("a path is not supported (use ?database=DB)"));
        }
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.contains(']'))
        {
            let (_, port) = authority.rsplit_once(':').unwrap_or_default();
            port.parse::<u16>()
                .map_err(|_| bad(&format!("port `{port}`")))?;
            authority.to_string()
        } else {
            format!("{authority}:8123")
        };
        let user = match userinfo {
            Some(u) => percent_decode(u, "the user name").map_err(|e| bad(&e))?,
            None => env_user.unwrap_or_else(|| "default".into()),
        };
        let mut database = "probegen".to_string();
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            match kv.split_once('=') {
                Some(("database", v)) if !v.is_empty() => {
                    database = percent_decode(v, "the database").map_err(|e| bad(&e))?;
                }
                _ => return Err(bad(&format!("unknown parameter `{kv}` (only database=DB)"))),
            }
        }
        if !database
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(bad("the database name must be [A-Za-z0-9_]+"));
        }
        Ok(Endpoint {
            authority,
            user,
            password: password.unwrap_or_default(),
            database,
            connect_timeout: timeout.min(Duration::from_secs(3)),
            request_timeout: timeout,
            buffered: false,
        })
    }

    fn addr(&self) -> Result<SocketAddr, String> {
        self.authority
            .to_socket_addrs()
            .map_err(|e| format!("{}: {e}", self.authority))?
            .next()
            .ok_or_else(|| format!("{}: no address", self.authority))
    }

    /// POSTs `body` as the insert `query` (with the settings `mode` asks for) and checks the
    /// answer (see [`Endpoint::post`]).
    pub(crate) fn insert(
        &self,
        query: &str,
        body: &[u8],
        mode: InsertMode,
        stop_at: &dyn Fn() -> Option<Instant>,
    ) -> Result<(), SendError> {
        let params = format!("query={}{}", url_encode(query), mode.url_settings());
        self.post(&params, body, stop_at).map(|_| ())
    }

    /// The server's `SELECT version()` answer (its first line), under the same deadline and
    /// checks as an insert.
    pub(crate) fn server_version(
        &self,
        stop_at: &dyn Fn() -> Option<Instant>,
    ) -> Result<String, SendError> {
        let body = self.post("query=SELECT%20version%28%29", b"", stop_at)?;
        Ok(body.lines().next().unwrap_or("").trim().to_string())
    }

    /// POSTs `body` with the URL parameters `params` and checks the answer: Ok (the answer's
    /// body) only when the server answered 200 and is recognisably ClickHouse (an
    /// `X-ClickHouse-*` header: 18.16 sends
    /// `X-ClickHouse-Server-Display-Name`, later releases also the query id and the
    /// `X-ClickHouse-Summary`) with no exception code. The whole request, answer included,
    /// ends by `request_timeout` from now, or earlier at the instant `stop_at` gives (the
    /// final flush's end): the socket waits in short slices and checks it. The answer is read
    /// up to [`ANSWER_CAP`] bytes; more is an error.
    fn post(
        &self,
        params: &str,
        body: &[u8],
        stop_at: &dyn Fn() -> Option<Instant>,
    ) -> Result<String, SendError> {
        let deadline = Instant::now() + self.request_timeout;
        let end = || stop_at().map_or(deadline, |s| s.min(deadline));
        let addr = self.addr().map_err(SendError::Transport)?;
        let left = end().saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SendError::Transport(
                "the final flush's time is over".into(),
            ));
        }
        let mut c = TcpStream::connect_timeout(&addr, self.connect_timeout.min(left))
            .map_err(|e| SendError::Transport(format!("connect {}: {e}", self.authority)))?;
        let auth = base64(format!("{}:{}", self.user, self.password).as_bytes());
        // no body, nothing to hold back: no `Expect` (and no wait for `100 Continue`)
        let expect = if body.is_empty() {
            ""
        } else {
            "Expect: 100-continue\r\n"
        };
        let head = format!(
            "POST /?{params} HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {auth}\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
             {expect}Connection: close\r\n\r\n",
            self.authority,
            body.len()
        );
        let mut io = Io {
            c: &mut c,
            end: &end,
        };
        // `Expect: 100-continue`: a server that refuses the request (a 401) says so before
        // the body is sent, rather than closing on an unread body (a reset, its answer lost)
        let early = io.write_all(head.as_bytes()).and_then(|()| {
            if body.is_empty() {
                Ok(None)
            } else {
                io.await_continue()
            }
        });
        let (sent, start) = match early {
            Ok(Some(answer)) => (Ok(()), answer),
            Ok(None) => (io.write_body(body), Vec::new()),
            Err(e) => (Err(e), Vec::new()),
        };
        // a server may answer before it read the body and close: read that answer rather
        // than report the reset of the write
        let raw = match (sent, io.read_answer(start)) {
            (_, Ok(raw)) if !raw.is_empty() => raw,
            (Err(e), _) => {
                return Err(SendError::Transport(format!(
                    "send to {}: {e}",
                    self.authority
                )))
            }
            (Ok(()), Err(e)) => {
                return Err(SendError::Transport(format!(
                    "read from {}: {e}",
                    self.authority
                )))
            }
            (Ok(()), Ok(_)) => {
                return Err(SendError::Transport(format!(
                    "{}: closed without an answer",
                    self.authority
                )))
            }
        };
        self.check_answer(&raw)
    }

    /// The verdict on an insert's answer (see [`Endpoint::insert`]).
    fn check_answer(&self, raw: &[u8]) -> Result<String, SendError> {
        let lossy = String::from_utf8_lossy(raw);
        let mut text: &str = &lossy;
        // interim answers (`100 Continue` after the wait for it ended) precede the answer
        while text.starts_with("HTTP/1.1 1") || text.starts_with("HTTP/1.0 1") {
            text = text.split_once("\r\n\r\n").map_or("", |(_, rest)| rest);
        }
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .filter(|_| head.starts_with("HTTP/1."))
            .ok_or_else(|| {
                SendError::Transport(format!("{}: not an HTTP answer", self.authority))
            })?;
        let headers: Vec<(String, &str)> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim()))
            .collect();
        let header = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        let clickhouse = headers.iter().any(|(n, _)| n.starts_with("x-clickhouse-"));
        let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            dechunk(body)
        } else {
            body.to_string()
        };
        let reason = self.one_line(&body);
        let code = header("x-clickhouse-exception-code")
            .and_then(|c| c.parse::<u32>().ok())
            .or_else(|| exception_code(&body))
            .filter(|&c| c != 0);
        match (status, code) {
            (200, None) if clickhouse => Ok(body),
            (200, None) => Err(SendError::NotClickhouse { status }),
            (401 | 403, _) | (_, Some(192..=195 | 516)) => Err(SendError::Auth { status, reason }),
            (_, Some(code)) if clickhouse && BAD_DATA_CODES.contains(&code) => {
                Err(SendError::BadData { code, reason })
            }
            _ if !clickhouse => Err(SendError::NotClickhouse { status }),
            _ => Err(SendError::Refused { status, reason }),
        }
    }

    /// The first line of an answer, short, and never the password (a server may echo it).
    fn one_line(&self, body: &str) -> String {
        let mut l: String = body
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .chars()
            .take(300)
            .collect();
        if !self.password.is_empty() {
            l = l.replace(&self.password, "***");
        }
        l
    }
}

/// An answer to an insert is a status line, a few headers and an error line at most.
pub(crate) const ANSWER_CAP: usize = 64 << 10;
/// The longest the body waits for `100 Continue` (a server that does not send it).
const CONTINUE_WAIT: Duration = Duration::from_secs(1);
/// The longest a socket waits before the request's end (and a stop) is checked again.
const SLICE: Duration = Duration::from_millis(200);

/// ClickHouse's codes for rows it cannot take (the batch's bytes, not the server): parse
/// errors (6 CANNOT_PARSE_TEXT, 25-27 escape/quoted string/input assertion, 38/41 date and
/// datetime, 72 number), 53 TYPE_MISMATCH, 117 INCORRECT_DATA, 131 TOO_LARGE_STRING_SIZE.
const BAD_DATA_CODES: [u32; 10] = [6, 25, 26, 27, 38, 41, 53, 72, 117, 131];

/// `Code: N` at the start of ClickHouse's error text.
fn exception_code(body: &str) -> Option<u32> {
    let rest = body.trim_start().strip_prefix("Code: ")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// Why an insert was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// no answer: connect, send, read, the request's deadline, an answer past the cap
    Transport(String),
    /// an answer that is not ClickHouse's (no `X-ClickHouse-*` header): a proxy, another
    /// service on the port; nothing is taken as inserted on its word
    NotClickhouse { status: u16 },
    /// authentication or authorisation refused (401/403, ClickHouse's codes 192-195, 516)
    Auth { status: u16, reason: String },
    /// ClickHouse refused the rows themselves (a parse error): the batch, not the server
    BadData { code: u32, reason: String },
    /// any other refusal (a missing table, an overloaded server): retried
    Refused { status: u16, reason: String },
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Transport(e) => write!(f, "{e}"),
            SendError::NotClickhouse { status } => write!(
                f,
                "HTTP {status} without X-ClickHouse headers: not a ClickHouse answer (not taken as inserted)"
            ),
            SendError::Auth { status, reason } => {
                write!(f, "authentication failed (HTTP {status}): {reason}")
            }
            SendError::BadData { code, reason } => {
                write!(f, "ClickHouse refused the rows (code {code}): {reason}")
            }
            SendError::Refused { status, reason } => write!(f, "HTTP {status}: {reason}"),
        }
    }
}

/// The socket of one request, bounded by its end instant.
struct Io<'a> {
    c: &'a mut TcpStream,
    end: &'a dyn Fn() -> Instant,
}

impl Io<'_> {
    /// Sets the socket's timeouts to the next slice; an error once the end is past.
    fn slice(&mut self) -> std::io::Result<()> {
        let left = (self.end)().saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request's time is over (--clickhouse-timeout, or the final flush's end)",
            ));
        }
        let t = Some(left.min(SLICE));
        self.c.set_read_timeout(t)?;
        self.c.set_write_timeout(t)
    }

    fn write_all(&mut self, mut b: &[u8]) -> std::io::Result<()> {
        while !b.is_empty() {
            self.slice()?;
            match self.c.write(b) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => b = &b[n..],
                Err(e) if waiting(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The body in pieces; stops early when the server has already answered.
    fn write_body(&mut self, body: &[u8]) -> std::io::Result<()> {
        for piece in body.chunks(64 << 10) {
            if self.answered() {
                return Ok(());
            }
            self.write_all(piece)?;
        }
        Ok(())
    }

    fn answered(&mut self) -> bool {
        let mut one = [0u8; 1];
        let _ = self.c.set_nonblocking(true);
        let r = matches!(self.c.peek(&mut one), Ok(n) if n > 0);
        let _ = self.c.set_nonblocking(false);
        r
    }

    /// After the head: waits (at most [`CONTINUE_WAIT`]) for `100 Continue`. `None`: send
    /// the body (it came, or the server does not use it); `Some`: the server answered for
    /// good already (the bytes of its answer so far).
    fn await_continue(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let until = Instant::now() + CONTINUE_WAIT;
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while Instant::now() < until {
            self.slice()?;
            let left = until.saturating_duration_since(Instant::now());
            self.c
                .set_read_timeout(Some(left.clamp(Duration::from_millis(1), SLICE)))?;
            match self.c.read(&mut buf) {
                Ok(0) => return Ok(Some(got)),
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        if got.starts_with(b"HTTP/1.1 100") || got.starts_with(b"HTTP/1.0 100") {
                            let _ = got.drain(..end + 4);
                            return Ok(if got.is_empty() { None } else { Some(got) });
                        }
                        return Ok(Some(got));
                    }
                    if got.len() > ANSWER_CAP {
                        return Ok(Some(got));
                    }
                }
                Err(e) if waiting(&e) => {}
                Err(_) if !got.is_empty() => return Ok(Some(got)),
                Err(e) => return Err(e),
            }
        }
        Ok(if got.is_empty() { None } else { Some(got) })
    }

    /// The answer up to the close (`Connection: close`), at most [`ANSWER_CAP`] bytes,
    /// after the `raw` bytes already read.
    fn read_answer(&mut self, mut raw: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let mut buf = [0u8; 8192];
        loop {
            if let Err(e) = self.slice() {
                return if raw.is_empty() {
                    Err(e)
                } else {
                    Err(partial(e, raw.len()))
                };
            }
            match self.c.read(&mut buf) {
                Ok(0) => return Ok(raw),
                Ok(n) => {
                    raw.extend_from_slice(&buf[..n]);
                    if raw.len() > ANSWER_CAP {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!(
                                "an answer longer than {} KiB: not an insert's",
                                ANSWER_CAP >> 10
                            ),
                        ));
                    }
                }
                Err(e) if waiting(&e) => {}
                Err(_) if !raw.is_empty() => return Ok(raw),
                Err(e) => return Err(e),
            }
        }
    }
}

fn waiting(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

fn partial(e: std::io::Error, got: usize) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{e} ({got} bytes of the answer came)"))
}

/// The payload of a chunked body (ClickHouse answers SELECTs chunked).
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

fn url_encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                o.push(T[(n >> shift) as usize & 63] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn urls() {
        let e = Endpoint::parse_with("http://127.0.0.1:18123", T, None, None).expect("url");
        assert_eq!(
            (e.authority.as_str(), e.user.as_str(), e.password.as_str()),
            ("127.0.0.1:18123", "default", "")
        );
        assert_eq!(e.database, "probegen");
        let e = Endpoint::parse_with(
            "http://in%40gest@ch.example:8124/?database=fleet",
            T,
            None,
            Some("from-file".into()),
        )
        .expect("url");
        assert_eq!(
            (e.user.as_str(), e.password.as_str(), e.database.as_str()),
            ("in@gest", "from-file", "fleet")
        );
        assert_eq!(e.authority, "ch.example:8124");
        // the user from the environment when the URL has none; default port
        let e = Endpoint::parse_with("http://ch/", T, Some("u".into()), Some("pw".into()))
            .expect("url");
        assert_eq!(
            (e.authority.as_str(), e.user.as_str(), e.password.as_str()),
            ("ch:8123", "u", "pw")
        );
        assert!(!format!("{e:?}").contains("pw"), "{e:?}");
        for bad in [
            "ch:8123",
            "https://ch",
            "ftp://ch",
            "http://ch:port",
            "http://ch/db",
            "http://ch?x=1",
            "http://ch?database=a;b",
            "http://",
            "http://ch/?database=a@b",
        ] {
            assert!(
                Endpoint::parse_with(bad, T, None, None).is_err(),
                "{bad} accepted"
            );
        }
    }

    /// A URL carrying a password is refused, and no message built from a URL shows its
    /// userinfo, whatever else is wrong with it.
    #[test]
    fn no_message_shows_the_password() {
        const SECRET: &str = "pgMarkS3cret";
        for url in [
            "http://u:pgMarkS3cret@ch:8123",
            "http://u:pgMarkS3cret@ch:99999",
            "http://u:pgMarkS3cret@ch:port",
            "http://u:pgMarkS3cret@ch/db",
            "http://u:pgMarkS3cret@ch?x=1",
            "http://u:pgMark?S3cret@ch",
            "http://u:pgMark/S3cret@ch",
            "https://u:pgMarkS3cret@ch",
            "ftp://u:pgMarkS3cret@ch",
            "u:pgMarkS3cret@ch:8123",
            "pgMarkS3cret@ch",
            "http://pgMarkS3cret%zz@ch",
            "http://pgMarkS3cret%ff@ch",
            "http://u:pgMarkS3cret@",
            "http://u:pgMarkS3cret@@ch",
            "http://:pgMarkS3cret@ch?database=a;b",
            "u:pgMarkS3cret@ch://x",
        ] {
            let e = Endpoint::parse_with(url, T, None, None).expect_err(url);
            assert!(!e.contains(SECRET), "{url}: {e}");
            assert!(!e.contains("pgMark"), "{url}: {e}");
            assert!(!e.contains("S3cret"), "{url}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        let e = Endpoint::parse_with("http://u:pgMarkS3cret@ch:8123", T, None, None)
            .expect_err("password");
        assert!(e.contains("--clickhouse-password-file"), "{e}");
        assert!(e.contains("`http://***@ch:8123`"), "{e}");
    }

    #[test]
    fn encodings() {
        assert_eq!(base64(b"default:s3cret"), "ZGVmYXVsdDpzM2NyZXQ=");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b""), "");
        assert_eq!(
            url_encode("INSERT INTO a.b FORMAT X"),
            "INSERT%20INTO%20a.b%20FORMAT%20X"
        );
        assert_eq!(dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), "abcde");
    }

    #[test]
    fn answers_are_judged_by_what_clickhouse_sends() {
        let e = Endpoint::parse_with("http://u@127.0.0.1:1", T, None, Some("s3cret".into()))
            .expect("url");
        let ch = "X-ClickHouse-Server-Display-Name: vm\r\nTransfer-Encoding: chunked\r\n";
        let answer = |status: &str, headers: &str, body: &str| {
            let chunked = if body.is_empty() {
                "0\r\n\r\n".to_string()
            } else {
                format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
            };
            e.check_answer(format!("HTTP/1.1 {status}\r\n{headers}\r\n{chunked}").as_bytes())
        };
        // 18.16's answer to an insert, also after a late 100 Continue
        assert_eq!(answer("200 OK", ch, ""), Ok(String::new()));
        assert_eq!(
            e.check_answer(
                format!("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n{ch}\r\n0\r\n\r\n")
                    .as_bytes()
            ),
            Ok(String::new())
        );
        assert_eq!(
            answer(
                "200 OK",
                "Content-Type: text/html\r\nTransfer-Encoding: chunked\r\n",
                "<html>"
            ),
            Err(SendError::NotClickhouse { status: 200 })
        );
        let parse =
            "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: x";
        assert!(matches!(
            answer("500 Internal Server Error", ch, parse),
            Err(SendError::BadData { code: 27, .. })
        ));
        let missing =
            "Code: 60, e.displayText() = DB::Exception: Table probegen.chains doesn't exist.";
        assert!(matches!(
            answer("404 Not Found", ch, missing),
            Err(SendError::Refused { status: 404, .. })
        ));
        // later releases: the code in a header, even on a 200
        let late = format!("{ch}X-ClickHouse-Exception-Code: 241\r\n");
        assert!(matches!(
            answer("200 OK", &late, ""),
            Err(SendError::Refused { status: 200, .. })
        ));
        // a 401 is what it is, with the reason and never the password
        let a = answer(
            "401 Unauthorized",
            ch,
            "Code: 193, Wrong password s3cret for user u",
        );
        let Err(err @ SendError::Auth { status: 401, .. }) = a else {
            panic!("{a:?}");
        };
        let line = err.to_string();
        assert!(
            line.starts_with("authentication failed (HTTP 401): Code: 193"),
            "{line}"
        );
        assert!(!line.contains("s3cret"), "{line}");
    }

    #[test]
    fn refused_connection_is_an_error_not_a_hang() {
        // a port nothing listens on: bind, read the port, close
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("port");
        let e = Endpoint::parse_with(
            &format!("http://127.0.0.1:{port}"),
            Duration::from_secs(2),
            None,
            None,
        )
        .expect("url");
        let t0 = std::time::Instant::now();
        assert!(matches!(
            e.insert("SELECT 1", b"", InsertMode::Plain, &|| None),
            Err(SendError::Transport(_))
        ));
        assert!(t0.elapsed() < Duration::from_secs(3));
    }
}
