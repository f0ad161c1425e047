//! A fake ClickHouse HTTP interface on loopback (a thread per connection) that answers
//! `SELECT version()` with a given release, takes every insert as ClickHouse 18.16 and later
//! do (`100 Continue`, then a 200 with an `X-ClickHouse-*` header), and keeps every request:
//! the sink's own bodies, as they crossed the wire, for a test to count or load elsewhere.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the fake took.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// the request line's path (`/?query=...&settings`)
    pub path: String,
    /// the insert's table (`INSERT INTO db.TABLE`), `None` for any other query
    pub table: Option<String>,
    pub body: Vec<u8>,
}

impl Request {
    /// The body's rows (JSONEachRow: one a line).
    pub(crate) fn rows(&self) -> usize {
        self.body.iter().filter(|&&b| b == b'\n').count()
    }
}

pub(crate) struct FakeClickHouse {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

/// `%XX` decoding of a request path (enough for the sink's `url_encode`).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            s.get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok()),
        ) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve_one(mut c: TcpStream, version: &str, requests: &Mutex<Vec<Request>>) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match c.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("")
        .to_string();
    let lower = head.to_ascii_lowercase();
    let len: usize = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if lower.contains("expect: 100-continue") {
        let _ = c.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let mut body = vec![0u8; len];
    if c.read_exact(&mut body).is_err() {
        return;
    }
    let query = decode(path.split_once("query=").map_or("", |(_, q)| q));
    let query = query.split('&').next().unwrap_or("").to_string();
    let table = query
        .strip_prefix("INSERT INTO ")
        .and_then(|r| r.split_whitespace().next())
        .map(|t| t.rsplit('.').next().unwrap_or(t).to_string());
    let answer = if query.trim() == "SELECT version()" {
        format!("{version}\n")
    } else {
        String::new()
    };
    requests
        .lock()
        .expect("requests")
        .push(Request { path, table, body });
    let _ = write!(
        c,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-ClickHouse-Server-Display-Name: fake\r\n\
         Connection: close\r\n\r\n{answer}",
        answer.len()
    );
}

impl FakeClickHouse {
    /// Listens on 127.0.0.1:0; `version` is what `SELECT version()` answers.
    pub(crate) fn start(version: &str) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = l.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (r2, v) = (requests.clone(), version.to_string());
        std::thread::spawn(move || {
            for c in l.incoming().map_while(Result::ok) {
                let (r3, v3) = (r2.clone(), v.clone());
                std::thread::spawn(move || serve_one(c, &v3, &r3));
            }
        });
        FakeClickHouse { addr, requests }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://default@{}/?database=probegen", self.addr)
    }

    /// The inserts taken so far, in arrival order.
    pub(crate) fn inserts(&self) -> Vec<Request> {
        self.requests
            .lock()
            .expect("requests")
            .iter()
            .filter(|r| r.table.is_some())
            .cloned()
            .collect()
    }

    /// Every request so far (the version question included).
    pub(crate) fn all(&self) -> Vec<Request> {
        self.requests.lock().expect("requests").clone()
    }
}
