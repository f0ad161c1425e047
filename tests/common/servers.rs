//! Real servers for the integration tests (Debian's `prometheus`, `clickhouse-server`): found
//! on `$PATH` or in the Debian location (a missing binary fails the test, naming the package),
//! started on loopback with their own config, data directory and free port, stopped by a drop
//! guard on every path. Plus the small HTTP client the tests talk to them with.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// `collector/tests/data/<name>`.
pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("collector/tests/data")
        .join(name)
}

/// Children and a temporary directory; killed, reaped and removed on drop (any path,
/// including a failed assertion).
pub(crate) struct Guard {
    pub dir: PathBuf,
    pub children: Vec<(String, Child)>,
}

impl Guard {
    /// A fresh directory `$TMPDIR/<tag>-<pid>`.
    pub(crate) fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Guard {
            dir,
            children: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, name: &str, c: Child) -> usize {
        self.children.push((name.to_string(), c));
        self.children.len() - 1
    }

    /// Kills and reaps one child by index, keeping the others' indices valid.
    pub(crate) fn kill(&mut self, i: usize) {
        let c = &mut self.children[i].1;
        let _ = c.kill();
        let _ = c.wait();
    }

    /// Sends SIGTERM to child `i` and waits for it (at most `within`); its exit status.
    pub(crate) fn terminate(&mut self, i: usize, within: Duration) -> std::process::ExitStatus {
        let pid = self.children[i].1.id();
        let st = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(st.success(), "kill -TERM {pid}");
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.exited(i) {
                return s;
            }
            assert!(
                t0.elapsed() < within,
                "{} did not exit within {within:?} of SIGTERM",
                self.children[i].0
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn exited(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        self.children[i].1.try_wait().ok().flatten()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::env::var_os("PROBEGEN_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `$<env>`, else `name` on `$PATH`, else in `fallback_dir`. Panics (never skips) naming the
/// Debian package and the script that installs it.
pub(crate) fn server_bin(name: &str, env: &str, fallback_dir: &str, package: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "${env}={} is not a file (the Debian package `{package}` is installed by \
             `bash scripts/install-deps.sh`)",
            p.display()
        );
        return p;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from(fallback_dir)])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` was not found on $PATH or in {fallback_dir}: install the Debian package \
                 `{package}` with `bash scripts/install-deps.sh` (as root), or point ${env} at it"
            )
        })
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Percent-encoding of a query parameter value.
pub(crate) fn urlencode(s: &str) -> String {
    let mut o = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// One HTTP/1.0 request (no chunked encoding in the reply): status and body.
pub(crate) fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> Result<(u16, String), String> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    c.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        c,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .and_then(|_| c.write_all(body))
    .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no header end in {raw:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    Ok((status, body.to_string()))
}

pub(crate) fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    http(addr, "GET", path, "", b"")
}

/// The last 20 lines of a log file.
pub(crate) fn tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

// --------------------------------------------------------------- prometheus ---

pub(crate) fn prometheus_bin() -> PathBuf {
    server_bin(
        "prometheus",
        "PROBEGEN_PROMETHEUS",
        "/usr/bin",
        "prometheus",
    )
}

/// Starts `prometheus` with `config` on a free loopback port (3 attempts: a port taken
/// between the probe and the bind); its address once `/-/ready` answers.
pub(crate) fn start_prometheus(g: &mut Guard, config: &Path) -> SocketAddr {
    let bin = prometheus_bin();
    let log = g.dir.join("prometheus.log");
    for attempt in 0..3 {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let tsdb = g.dir.join(format!("tsdb-{attempt}"));
        let c = Command::new(&bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("prometheus.log"))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let i = g.add("prometheus", c);
        let t0 = Instant::now();
        let ready = loop {
            if matches!(http_get(addr, "/-/ready"), Ok((200, _))) {
                break true;
            }
            if g.exited(i).is_some() || t0.elapsed() > Duration::from_secs(30) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        if ready {
            return addr;
        }
        eprintln!(
            "prometheus on {addr} not ready (attempt {}): {}",
            attempt + 1,
            tail(&log)
        );
        g.kill(i);
    }
    panic!(
        "prometheus did not become ready in 3 attempts; last log:\n{}",
        tail(&log)
    )
}

/// `/api/v1/query?query=Q`: the result vector of a successful instant query.
pub(crate) fn prom_query(prom: SocketAddr, q: &str) -> Result<Vec<Value>, String> {
    let (status, body) = http_get(prom, &format!("/api/v1/query?query={}", urlencode(q)))?;
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if v["status"] != "success" || v["data"]["resultType"] != "vector" {
        return Err(format!("unexpected reply {body}"));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

pub(crate) fn sample_value(s: &Value) -> f64 {
    s["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample value in {s}"))
}

// ---------------------------------------------------------------- collector ---

/// Spawns `probegen collect ARGS` with stderr piped into a channel of lines. When the guard
/// runs a [`ClickHouse`], the collector gets its password as systemd would pass it: the
/// credential `clickhouse-password` under `$CREDENTIALS_DIRECTORY` (the URL carries none).
pub(crate) fn spawn_collector(
    g: &mut Guard,
    name: &str,
    args: &[&str],
) -> (usize, mpsc::Receiver<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_probegen"));
    // one server, or the first of several shards (they share the password)
    let credentials = ["clickhouse", "clickhouse-0"]
        .iter()
        .map(|d| g.dir.join(d).join(CREDENTIALS))
        .find(|c| c.join("clickhouse-password").is_file());
    if let Some(credentials) = credentials {
        cmd.env("CREDENTIALS_DIRECTORY", &credentials);
    }
    let mut child = cmd
        .arg("collect")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn probegen collect");
    let stderr = child.stderr.take().expect("stderr");
    let i = g.add(name, child);
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    (i, rx)
}

/// The collector's metrics address (its `metrics on http://ADDR/metrics` line).
pub(crate) fn metrics_address(rx: &mpsc::Receiver<String>) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no metrics address from the collector in 30 s: {seen:?}"
        );
        match rx.recv_timeout(left) {
            Ok(l) => {
                if let Some(a) = l
                    .strip_prefix("probegen collect: metrics on http://")
                    .and_then(|r| r.strip_suffix("/metrics"))
                {
                    return a.parse().expect("metrics address");
                }
                seen.push(l);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the collector exited before serving metrics: {seen:?}")
            }
        }
    }
}

// --------------------------------------------------------------- clickhouse ---

pub(crate) fn clickhouse_bin() -> PathBuf {
    server_bin(
        "clickhouse-server",
        "PROBEGEN_CLICKHOUSE_SERVER",
        "/usr/sbin",
        "clickhouse-server",
    )
}

/// The directory of the test ClickHouse's password credential, under its directory.
const CREDENTIALS: &str = "credentials";

/// A ClickHouse server of the test: its own config, data directory and ports on loopback,
/// the `default` user with a password; stopped and started again on the same data.
pub(crate) struct ClickHouse {
    pub http: SocketAddr,
    pub password: String,
    /// the password in a file of mode 0600 (`--clickhouse-password-file`); the same file is
    /// the systemd credential [`spawn_collector`] passes
    pub password_file: PathBuf,
    dir: PathBuf,
    child: Option<usize>,
}

impl ClickHouse {
    /// Writes the config into `g.dir/clickhouse` and starts the server (its `remote_servers`
    /// has `probegen_test`: a one-shard cluster of itself).
    pub(crate) fn start(g: &mut Guard) -> Self {
        // a port free_port() saw free can be taken by a parallel test's server before this
        // one binds it: then new ports (a few times), never a failed test for the race
        let mut last = String::new();
        for _ in 0..4 {
            let (http_port, tcp_port) = (free_port(), free_port());
            let shard = format!(
                "<shard><replica><host>127.0.0.1</host><port>{tcp_port}</port>\
                 <password>pg-test-secret</password></replica></shard>"
            );
            match Self::try_start_node(
                g,
                "clickhouse",
                (http_port, tcp_port),
                &[("probegen_test", shard)],
            ) {
                Ok(ch) => return ch,
                Err(e) if e.contains("Address already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("{last}")
    }

    /// `n` servers (`clickhouse-<i>`), each with the cluster `probegen_shards`: one shard per
    /// server, in order.
    pub(crate) fn start_shards(g: &mut Guard, n: usize) -> Vec<Self> {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let shards: String = ports
            .iter()
            .map(|(_, tcp)| {
                format!(
                    "<shard><replica><host>127.0.0.1</host><port>{tcp}</port>\
                     <password>pg-test-secret</password></replica></shard>"
                )
            })
            .collect();
        ports
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                Self::start_node(
                    g,
                    &format!("clickhouse-{i}"),
                    p,
                    &[("probegen_shards", shards.clone())],
                )
            })
            .collect()
    }

    /// One server in `g.dir/<name>` on `(http, tcp)` ports with the clusters `clusters`
    /// (name, `<shard>` elements).
    fn start_node(
        g: &mut Guard,
        name: &str,
        ports: (u16, u16),
        clusters: &[(&str, String)],
    ) -> Self {
        Self::try_start_node(g, name, ports, clusters).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::start_node`], or the server's words when it exited.
    fn try_start_node(
        g: &mut Guard,
        name: &str,
        (http_port, tcp_port): (u16, u16),
        clusters: &[(&str, String)],
    ) -> Result<Self, String> {
        let dir = g.dir.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir clickhouse");
        let d = dir.display();
        let remote: String = clusters
            .iter()
            .map(|(c, shards)| format!("<{c}>{shards}</{c}>"))
            .collect();
        let config = format!(
            "<yandex>\n  <logger><level>warning</level><log>{d}/server.log</log>\
             <errorlog>{d}/error.log</errorlog><console>0</console></logger>\n  \
             <http_port>{http_port}</http_port>\n  <tcp_port>{tcp_port}</tcp_port>\n  \
             <listen_host>127.0.0.1</listen_host>\n  <path>{d}/data/</path>\n  \
             <tmp_path>{d}/tmp/</tmp_path>\n  <user_files_path>{d}/user_files/</user_files_path>\n  \
             <format_schema_path>{d}/format_schemas/</format_schema_path>\n  \
             <users_config>{d}/users.xml</users_config>\n  <default_profile>default</default_profile>\n  \
             <default_database>default</default_database>\n  <mark_cache_size>268435456</mark_cache_size>\n  \
             <remote_servers>{remote}</remote_servers>\n</yandex>\n"
        );
        std::fs::write(dir.join("config.xml"), config).expect("config.xml");
        std::fs::write(
            dir.join("users.xml"),
            "<yandex>\n  <profiles><default/></profiles>\n  <users><default>\
             <password>pg-test-secret</password><networks><ip>127.0.0.1</ip></networks>\
             <profile>default</profile><quota>default</quota></default></users>\n  \
             <quotas><default/></quotas>\n</yandex>\n",
        )
        .expect("users.xml");
        let credentials = dir.join(CREDENTIALS);
        std::fs::create_dir_all(&credentials).expect("mkdir credentials");
        let password_file = credentials.join("clickhouse-password");
        std::fs::write(&password_file, "pg-test-secret\n").expect("password file");
        std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600))
            .expect("chmod password file");
        let mut ch = ClickHouse {
            http: SocketAddr::from(([127, 0, 0, 1], http_port)),
            password: "pg-test-secret".into(),
            password_file,
            dir,
            child: None,
        };
        ch.try_restart(g)?;
        Ok(ch)
    }

    /// (Re)starts the server on the same config and data; returns once it answers.
    pub(crate) fn restart(&mut self, g: &mut Guard) {
        self.try_restart(g).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::restart`], or the server's words when it exited.
    fn try_restart(&mut self, g: &mut Guard) -> Result<(), String> {
        assert!(self.child.is_none(), "clickhouse already running");
        let bin = clickhouse_bin();
        let c = Command::new(&bin)
            .arg(format!(
                "--config-file={}",
                self.dir.join("config.xml").display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("stderr.log")).expect("stderr.log"))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let i = g.add("clickhouse-server", c);
        self.child = Some(i);
        let t0 = Instant::now();
        loop {
            if matches!(self.query("SELECT 1"), Ok(s) if s.trim() == "1") {
                return Ok(());
            }
            if let Some(st) = g.exited(i) {
                self.child = None;
                return Err(format!(
                    "clickhouse-server exited ({st}): {}\n{}",
                    tail(&self.dir.join("error.log")),
                    tail(&self.dir.join("stderr.log"))
                ));
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "clickhouse-server not answering on {} after 60 s: {}",
                self.http,
                tail(&self.dir.join("error.log"))
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the server (SIGTERM, then waits for it).
    pub(crate) fn stop(&mut self, g: &mut Guard) {
        let i = self.child.take().expect("clickhouse not running");
        let st = g.terminate(i, Duration::from_secs(60));
        eprintln!("clickhouse-server stopped ({st})");
    }

    /// The collector's URL for this server (no password: it is refused in a URL; the
    /// collector reads `password_file`, or the credential `spawn_collector` passes).
    pub(crate) fn url(&self) -> String {
        format!("http://default@{}/?database=probegen", self.http)
    }

    /// Runs one statement; the answer's body.
    pub(crate) fn query(&self, q: &str) -> Result<String, String> {
        self.query_with(q, "")
    }

    /// [`ClickHouse::query`] with settings as URL parameters (`&name=value...`).
    pub(crate) fn query_with(&self, q: &str, settings: &str) -> Result<String, String> {
        let path = format!(
            "/?user=default&password={}{settings}",
            urlencode(&self.password)
        );
        match http(self.http, "POST", &path, "", q.as_bytes())? {
            (200, body) => Ok(body),
            (s, body) => Err(format!("HTTP {s}: {body}")),
        }
    }

    /// A query whose answer is one number.
    pub(crate) fn count(&self, q: &str) -> u64 {
        let a = self.query(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        a.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{q}: not a number: {a:?}"))
    }

    /// Creates the fleet tables with `probegen schema --clickhouse EXTRA`.
    pub(crate) fn create_tables(&self, extra: &[&str]) {
        let o = Command::new(env!("CARGO_BIN_EXE_probegen"))
            .args(["schema", "--clickhouse"])
            .args(extra)
            .output()
            .expect("probegen schema");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let ddl = String::from_utf8_lossy(&o.stdout);
        for st in sink_clickhouse::statements(&ddl) {
            self.query(&st).unwrap_or_else(|e| panic!("{st}\n-> {e}"));
        }
    }
}

/// `deploy/clickhouse/<name>.sql` with `{job_id:String}` bound to `job` (18.16 has no query
/// parameters), run as TSV.
pub(crate) fn fleet_question(ch: &ClickHouse, name: &str, job: &str) -> Vec<Vec<String>> {
    fleet_question_with(ch, name, job, "")
}

/// [`fleet_question`] with settings (URL parameters).
pub(crate) fn fleet_question_with(
    ch: &ClickHouse,
    name: &str,
    job: &str,
    settings: &str,
) -> Vec<Vec<String>> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/clickhouse")
        .join(format!("{name}.sql"));
    let sql = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let sql = sql.replace("{job_id:String}", &format!("'{job}'"));
    let out = ch
        .query_with(&format!("{}\nFORMAT TSV", sql.trim_end()), settings)
        .unwrap_or_else(|e| panic!("{name}.sql: {e}"));
    let rows: Vec<Vec<String>> = out
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    eprintln!("{name}.sql: {} rows\n{out}", rows.len());
    rows
}
