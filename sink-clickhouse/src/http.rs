//! The ClickHouse HTTP interface endpoint (`--clickhouse URL`) and one blocking HTTP/1.1 POST
//! over std's TcpStream: ClickHouse's HTTP API needs nothing more (a body, Basic credentials,
//! the status line), and the collector stays free of an HTTP stack.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

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
    pub fn parse(url: &str, timeout: Duration) -> Result<Self, String> {
        if std::env::var_os(PASSWORD_ENV).is_some() {
            return Err(format!(
                "${PASSWORD_ENV} is set: the password is not read from the environment; put it \
                 in --clickhouse-password-file FILE (mode 0600) or the systemd credential \
                 `{}`, and unset the variable",
                crate::PASSWORD_CREDENTIAL
            ));
        }
        let user = std::env::var(USER_ENV).ok().filter(|v| !v.is_empty());
        Self::parse_with(url, timeout, user, None)
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
        })
    }

    fn addr(&self) -> Result<SocketAddr, String> {
        self.authority
            .to_socket_addrs()
            .map_err(|e| format!("{}: {e}", self.authority))?
            .next()
            .ok_or_else(|| format!("{}: no address", self.authority))
    }

    /// POSTs `body` with `query` in the URL; Ok on HTTP 200, else the status and the first
    /// line of ClickHouse's answer.
    pub fn post(&self, query: &str, body: &[u8]) -> Result<String, String> {
        let addr = self.addr()?;
        let mut c = TcpStream::connect_timeout(&addr, self.connect_timeout)
            .map_err(|e| format!("connect {}: {e}", self.authority))?;
        c.set_read_timeout(Some(self.request_timeout))
            .and_then(|_| c.set_write_timeout(Some(self.request_timeout)))
            .map_err(|e| e.to_string())?;
        let auth = base64(format!("{}:{}", self.user, self.password).as_bytes());
        let head = format!(
            "POST /?query={} HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {auth}\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            url_encode(query),
            self.authority,
            body.len()
        );
        c.write_all(head.as_bytes())
            .and_then(|_| c.write_all(body))
            .and_then(|_| c.flush())
            .map_err(|e| format!("send to {}: {e}", self.authority))?;
        let mut raw = Vec::new();
        c.read_to_end(&mut raw)
            .map_err(|e| format!("read from {}: {e}", self.authority))?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{}: not an HTTP answer", self.authority))?;
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_string()
        };
        if status == 200 {
            Ok(body)
        } else {
            Err(format!(
                "HTTP {status}: {}",
                body.lines().next().unwrap_or("").trim()
            ))
        }
    }
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
        assert!(e.post("SELECT 1", b"").is_err());
        assert!(t0.elapsed() < Duration::from_secs(3));
    }
}
