//! The ClickHouse HTTP interface endpoint (`--clickhouse URL`) and one blocking HTTP/1.1 POST
//! over std's TcpStream: ClickHouse's HTTP API needs nothing more (a body, Basic credentials,
//! the status line), and the collector stays free of an HTTP stack.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Environment variables for credentials the URL does not carry.
pub(crate) const PASSWORD_ENV: &str = "PROBEGEN_CLICKHOUSE_PASSWORD";
pub(crate) const USER_ENV: &str = "PROBEGEN_CLICKHOUSE_USER";

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

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in `{s}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` is not UTF-8 after decoding"))
}

impl Endpoint {
    /// `http://[user[:password]@]host[:port][/][?database=DB]`; the user defaults to
    /// `$PROBEGEN_CLICKHOUSE_USER` else `default`, the password to
    /// `$PROBEGEN_CLICKHOUSE_PASSWORD` else empty, the database to `probegen`, the port to 8123.
    pub fn parse(url: &str, timeout: Duration) -> Result<Self, String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self::parse_with(url, timeout, env(USER_ENV), env(PASSWORD_ENV))
    }

    fn parse_with(
        url: &str,
        timeout: Duration,
        env_user: Option<String>,
        env_password: Option<String>,
    ) -> Result<Self, String> {
        let bad = |why: &str| format!("--clickhouse `{url}`: {why}");
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
        let hostpart = hostpart.trim_end_matches('/');
        if hostpart.contains('/') {
            return Err(bad("a path is not supported (use ?database=DB)"));
        }
        let (userinfo, authority) = match hostpart.rsplit_once('@') {
            Some((u, a)) => (Some(u), a),
            None => (None, hostpart),
        };
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
        let (user, password) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((n, p)) => (percent_decode(n)?, Some(percent_decode(p)?)),
                None => (percent_decode(u)?, None),
            },
            None => (env_user.unwrap_or_else(|| "default".into()), None),
        };
        let mut database = "probegen".to_string();
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            match kv.split_once('=') {
                Some(("database", v)) if !v.is_empty() => database = percent_decode(v)?,
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
            password: password.or(env_password).unwrap_or_default(),
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
            "http://ingest:p%40ss@ch.example:8124/?database=fleet",
            T,
            None,
            Some("ignored".into()),
        )
        .expect("url");
        assert_eq!(
            (e.user.as_str(), e.password.as_str(), e.database.as_str()),
            ("ingest", "p@ss", "fleet")
        );
        assert_eq!(e.authority, "ch.example:8124");
        // credentials from the environment when the URL has none; default port
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
        ] {
            assert!(
                Endpoint::parse_with(bad, T, None, None).is_err(),
                "{bad} accepted"
            );
        }
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
