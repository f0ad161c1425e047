//! The fleet side of the command line: `collect --clickhouse URL ...` options (they open
//! the ClickHouse sink the run adds) and `schema --clickhouse` (the ClickHouse DDL).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use collector::{ChainClock, CollectError, SinkError};

use crate::flags::{parse_duration, FlagError};
use sink_clickhouse::{
    ddl, read_password, upgrade, ClickhouseSink, Endpoint, SchemaOptions, ServerVersion,
    SinkOptions, SpoolStatus,
};

use crate::AgentError;

#[derive(clap::Args, Clone)]
pub struct FleetArgs {
    /// Also send every snapshot to ClickHouse's HTTP interface:
    /// http://[user@]host[:port][/?database=DB] (user also from $PROBEGEN_CLICKHOUSE_USER; the
    /// password never in the URL: --clickhouse-password-file or the systemd credential
    /// `clickhouse-password`)
    #[arg(long, value_name = "URL")]
    pub clickhouse: Option<String>,
    /// The ClickHouse password: the first line of FILE (mode 0600 or stricter). Without it,
    /// $CREDENTIALS_DIRECTORY/clickhouse-password when systemd passes that credential
    #[arg(long, value_name = "FILE", requires = "clickhouse")]
    pub clickhouse_password_file: Option<PathBuf>,
    /// Connect and request timeout of one ClickHouse insert
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub clickhouse_timeout: Duration,
    /// Spool directory for batches not yet in ClickHouse (default: OUT.clickhouse-spool)
    #[arg(long, value_name = "DIR")]
    pub clickhouse_spool: Option<PathBuf>,
    /// Spool limit in bytes; past it the oldest batches are dropped and counted
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20)]
    pub clickhouse_spool_bytes: u64,
    /// At exit, keep sending what is spooled this long (the rest waits for the next run)
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub clickhouse_flush: Duration,
    /// An idle window (nothing happened) goes to ClickHouse only as a heartbeat row this long
    /// after the last row (0s: every window); the rows' windows still add up to the time
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    pub clickhouse_heartbeat: Duration,
    /// Insert into the Buffer tables of `schema --clickhouse --buffer` (`<table>_buffer`)
    #[arg(long, requires = "clickhouse")]
    pub clickhouse_buffer: bool,
    /// Host name the snapshots carry (default: this host's; replay: the recording's)
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Replay: pause this long after each window (a recording played out over time)
    #[arg(long, value_parser = parse_duration)]
    pub replay_pace: Option<Duration>,
}

/// The ClickHouse sink as the flags configure it (none without `--clickhouse`).
pub struct Fleet {
    pub endpoint: Option<Endpoint>,
    pub spool: Option<PathBuf>,
    pub spool_bytes: u64,
    pub heartbeat: Duration,
}

impl FleetArgs {
    pub fn resolve(&self) -> Result<Fleet, AgentError> {
        if self.clickhouse_timeout.is_zero() {
            return Err(AgentError::Usage(
                "--clickhouse-timeout must be positive".into(),
            ));
        }
        if self.host.as_deref().is_some_and(str::is_empty) {
            return Err(AgentError::Usage("--host must not be empty".into()));
        }
        Ok(Fleet {
            endpoint: self
                .clickhouse
                .as_deref()
                .map(|u| -> Result<Endpoint, AgentError> {
                    let endpoint = Endpoint::parse(u, self.clickhouse_timeout)?;
                    let password = read_password(self.clickhouse_password_file.as_deref())?;
                    let mut endpoint = endpoint.with_password(password);
                    endpoint.buffered = self.clickhouse_buffer;
                    Ok(endpoint)
                })
                .transpose()?,
            spool: self.clickhouse_spool.clone(),
            spool_bytes: self.clickhouse_spool_bytes,
            heartbeat: self.clickhouse_heartbeat,
        })
    }
}

impl Fleet {
    /// Opens the spool (next to `out` unless `--clickhouse-spool` names it) and starts the
    /// sender; `clock` is the records' clock (live: this host's monotonic clock).
    pub fn open(
        &self,
        out: &std::path::Path,
        clock: ChainClock,
    ) -> Result<Option<Box<dyn collector::Sink>>, CollectError> {
        let Some(endpoint) = &self.endpoint else {
            return Ok(None);
        };
        let sink = ClickhouseSink::start(SinkOptions {
            endpoint: endpoint.clone(),
            spool_dir: self
                .spool
                .clone()
                .unwrap_or_else(|| sink_clickhouse::default_spool_dir(out)),
            spool_limit_bytes: self.spool_bytes,
            boot_id: sink_clickhouse::boot_id(),
            clock,
            min_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(5),
            heartbeat: self.heartbeat,
        })
        .map_err(|e| CollectError::Sink(SinkError::Spool(Box::new(e))))?;
        Ok(Some(Box::new(sink)))
    }
}

/// The ClickHouse line of the run's summary.
pub fn report(s: &collector::Summary) {
    for st in &s.sinks {
        let Some(c) = SpoolStatus::of(st) else {
            continue;
        };
        let peak_bytes = st.metric(sink_clickhouse::PEAK_BYTES).unwrap_or(0);
        let peak_batches = st.metric(sink_clickhouse::PEAK_BATCHES).unwrap_or(0);
        eprintln!(
            "probegen collect: clickhouse: sent {} batches, {} records; spool {} batches ({} bytes) left, peak {peak_batches} batches ({peak_bytes} bytes), dropped {}; send errors {}",
            c.sent_batches,
            c.sent_records,
            c.spool_batches,
            c.spool_bytes,
            c.spool_dropped,
            c.send_errors
        );
        // a line of its own (the line above keeps its shape for the scripts that read it)
        if c.quarantined_batches + c.unspooled_batches + c.lost_records > 0 {
            eprintln!(
                "probegen collect: clickhouse: lost {} records: {} batches quarantined, {} snapshots not spooled, {} dropped",
                c.lost_records, c.quarantined_batches, c.unspooled_batches, c.spool_dropped
            );
        }
    }
}

#[derive(clap::Args, Clone)]
pub struct SchemaArgs {
    /// Print the ClickHouse DDL of the fleet tables instead of the manifest's JSON Schema
    #[arg(long)]
    pub clickhouse: bool,
    /// With --clickhouse: local tables plus Distributed tables over this cluster
    #[arg(long, value_name = "NAME", requires = "clickhouse")]
    pub cluster: Option<String>,
    /// With --clickhouse: the database
    #[arg(long, default_value = "probegen", requires = "clickhouse")]
    pub database: String,
    /// With --clickhouse: retention TTL in days (0: none; ClickHouse before 19.6, e.g. Debian
    /// bookworm's 18.16, has no TTL)
    #[arg(
        long,
        value_name = "DAYS",
        default_value_t = 0,
        requires = "clickhouse"
    )]
    pub ttl_days: u32,
    /// A Buffer table in front of each table (`<table>_buffer`): for servers without
    /// asynchronous inserts (before 21.11) receiving many hosts' small inserts; collectors
    /// then insert with --clickhouse-buffer. Rows wait in the server's memory up to 60 s: a
    /// server crash loses them
    #[arg(long, requires = "clickhouse")]
    pub buffer: bool,
    /// With --clickhouse: the oldest ClickHouse release the tables must load on (MAJOR.MINOR,
    /// e.g. 26.9): from 19.10 names are LowCardinality and columns carry codecs
    #[arg(
        long,
        value_name = "VERSION",
        default_value = "18.16",
        requires = "clickhouse",
        value_parser = parse_server_version
    )]
    pub server_version: ServerVersion,
    /// With --clickhouse: for tables an earlier version made, the ALTER statements that add
    /// what they lack (the baseline's `chains` columns), then the DDL (new tables)
    #[arg(long, requires = "clickhouse")]
    pub upgrade: bool,
}

fn parse_server_version(s: &str) -> Result<ServerVersion, FlagError> {
    ServerVersion::parse(s).ok_or_else(|| FlagError::ServerVersion(s.to_string()))
}

/// Prints the manifest's JSON Schema, or with `--clickhouse` the fleet tables' DDL.
pub fn schema(a: &SchemaArgs) -> Result<ExitCode, AgentError> {
    if !a.clickhouse {
        print!("{}", manifest::json_schema());
        return Ok(ExitCode::SUCCESS);
    }
    let o = SchemaOptions {
        database: a.database.clone(),
        cluster: a.cluster.clone(),
        ttl_days: a.ttl_days,
        server: a.server_version,
        buffer: a.buffer,
    };
    let text = if a.upgrade { upgrade(&o) } else { ddl(&o) };
    print!("{}", text?);
    Ok(ExitCode::SUCCESS)
}
