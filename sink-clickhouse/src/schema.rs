//! The ClickHouse tables (`probegen schema --clickhouse`): one row source of truth for the
//! DDL and for the rows the sink writes (a unit test checks that every row carries exactly the
//! insertable columns).
//!
//! Works on Debian bookworm's ClickHouse 18.16 and on current releases: no `DateTime64`
//! (nanoseconds are `UInt64` `time_ns`, the `DateTime` `time` beside it is `MATERIALIZED`
//! from them), `ReplacingMergeTree` keyed by
//! (host, boot id, batch sequence, position) so a batch sent twice collapses to one
//! (`SELECT ... FINAL` is exact before the merge), partitions by day. `TTL` needs 19.6: it is
//! written only with `ttl_days > 0`.
//!
//! Storage per server release ([`SchemaOptions::server`], `--server-version`): on 18.16 (the
//! default, which every later release also loads) plain types, since `LowCardinality` needs
//! an experimental setting there (checked: "LowCardinality type is not allowed") and column
//! codecs do not parse; from 19.10 on, [`column_type`]: `LowCardinality(String)` for the
//! names a fleet repeats (host, kernel, function, module, errno names, owner, comm), and
//! codecs where the sort order makes values predictable: `DoubleDelta` for the batch and
//! snapshot counters, `Delta` for nanosecond times, `ZSTD` for the rest.

use crate::version::ServerVersion;

/// One table: its name and its columns. `time` is added to every table as
/// `DateTime MATERIALIZED toDateTime(intDiv(time_ns, 1000000000))`.
pub(crate) struct Table {
    pub name: &'static str,
    /// (column, type): the columns a row carries, in order
    pub columns: &'static [(&'static str, &'static str)],
    /// the ReplacingMergeTree sorting key (the idempotency key)
    pub key: &'static str,
}

/// Columns every row carries: where and which batch it came from.
const BATCH: [(&str, &str); 8] = [
    ("host", "String"),
    ("boot_id", "String"),
    ("run_id", "UInt64"),
    ("seq", "UInt64"),
    ("kernel", "String"),
    ("manifest_hash", "String"),
    ("snapshot", "UInt64"),
    ("time_ns", "UInt64"),
];

macro_rules! with_batch {
    ($($c:expr),* $(,)?) => {
        &[BATCH[0], BATCH[1], BATCH[2], BATCH[3], BATCH[4], BATCH[5], BATCH[6], BATCH[7], $($c),*]
    };
}

pub(crate) const RECORDS: Table = Table {
    name: "records",
    columns: with_batch![
        ("idx", "UInt32"),
        ("probe", "UInt32"),
        ("function", "String"),
        ("module", "String"),
        ("errno", "UInt32"),
        ("errno_name", "String"),
        ("pid", "UInt32"),
        ("tid", "UInt32"),
        ("comm", "String"),
        ("cgroup", "String"),
        ("cgroup_id", "UInt64"),
        ("job_id", "String"),
        ("job_keys", "Array(String)"),
        ("job_values", "Array(String)"),
        ("args", "Array(UInt64)"),
        ("ts_ns", "UInt64"),
        ("cpu", "UInt32"),
        ("rec_seq", "UInt64"),
    ],
    key: "host, boot_id, run_id, seq, idx",
};

pub(crate) const CHAINS: Table = Table {
    name: "chains",
    columns: with_batch![
        ("idx", "UInt32"),
        ("owner", "String"),
        ("owner_reason", "String"),
        ("owner_site", "String"),
        ("owner_candidates", "Array(String)"),
        ("errno", "UInt32"),
        ("errno_name", "String"),
        ("pid", "UInt32"),
        ("tid", "UInt32"),
        ("comm", "String"),
        ("origin_function", "String"),
        ("origin_module", "String"),
        ("origin_probe", "UInt32"),
        ("origin_errno", "UInt32"),
        ("origin_errno_name", "String"),
        ("functions", "Array(String)"),
        ("modules", "Array(String)"),
        ("link_probes", "Array(UInt32)"),
        ("link_errnos", "Array(UInt32)"),
        ("start_ns", "UInt64"),
        ("end_ns", "UInt64"),
        ("count", "UInt32"),
        ("last_end_ns", "UInt64"),
        ("summary", "String"),
        ("job_id", "String"),
        ("job_keys", "Array(String)"),
        ("job_values", "Array(String)"),
        // with `collect --baseline` (else 0 and empty): the baseline's note of the chain
        ("expected", "UInt8"),
        ("expected_why", "String"),
        ("bifurcation_after", "String"),
        ("bifurcation_baseline_next", "String"),
        ("bifurcation_share", "Float64"),
        ("bifurcation_this_next", "String"),
        ("bifurcation_shape", "String"),
        // the layer of the function entered next (`core`, `vendor`; empty: none)
        ("bifurcation_baseline_next_layer", "String"),
        ("bifurcation_this_next_layer", "String"),
    ],
    key: "host, boot_id, run_id, seq, idx",
};

/// The columns [`CHAINS`] gained since its first version, its last ones, by the version that
/// added them (`schema --upgrade` adds them to a fleet's existing tables): (what, how many).
pub(crate) const CHAINS_ADDED: [(&str, usize); 2] = [
    ("the baseline's note (collect --baseline)", 7),
    ("the layer of the bifurcation's next functions", 2),
];

pub(crate) const COUNTERS: Table = Table {
    name: "counters",
    columns: with_batch![
        ("probe", "UInt32"),
        ("function", "String"),
        ("module", "String"),
        ("calls", "UInt64"),
        ("failures", "UInt64"),
        ("errno_names", "Array(String)"),
        ("errno_counts", "Array(UInt64)"),
        ("received", "UInt64"),
        ("dropped_userspace", "UInt64"),
    ],
    key: "host, boot_id, run_id, seq, probe",
};

/// One row per snapshot, written last: a batch with its `snapshots` row is complete.
pub(crate) const SNAPSHOTS: Table = Table {
    name: "snapshots",
    columns: with_batch![
        ("is_final", "UInt8"),
        ("window_start_ns", "UInt64"),
        ("records", "UInt32"),
        ("chains", "UInt32"),
        ("drops_kernel", "UInt64"),
        ("drops_userspace", "UInt64"),
        ("seq_gaps", "UInt64"),
        ("decode_errors", "UInt64"),
        ("spool_dropped", "UInt64"),
        ("invariant_ok", "UInt8"),
    ],
    key: "host, boot_id, run_id, seq",
};

/// With `collect --baseline`: one row per (batch, handler, success shape), the host's
/// baseline as of the snapshot. Cumulative per collector run (`run_id`): a run's latest
/// batch holds its whole baseline, so the fleet's is the sum over each run's latest batch
/// (deploy/clickhouse/baselines.sql). `duration_log2`: always [`collector::LOG2_BUCKETS`]
/// counts, element `i` the successes that took [2^i, 2^(i+1)) ns (the first also 0 ns, the
/// last everything from 2^39 ns): hosts merge by adding the arrays (`sumForEach`), and
/// quantiles come from the sum; `p50_ns`..`p99_ns` are the host's own (its recent calls).
pub(crate) const BASELINES: Table = Table {
    name: "baselines",
    columns: with_batch![
        ("handler", "String"),
        ("handler_probe", "UInt32"),
        ("shape", "String"),
        ("functions", "Array(String)"),
        ("count", "UInt64"),
        ("successes", "UInt64"),
        ("other", "UInt64"),
        ("share", "Float64"),
        ("p50_ns", "UInt64"),
        ("p90_ns", "UInt64"),
        ("p99_ns", "UInt64"),
        ("duration_log2", "Array(UInt64)"),
    ],
    key: "host, boot_id, run_id, seq, handler, shape",
};

/// One row per RDMA port error counter that moved or reset in the snapshot's window (the
/// snapshot's `port_counters`: a healthy host writes none). `delta` never negative; `reset`
/// empty, or why the counter's deltas start again (`backwards`: a driver reload, its delta is
/// its value; `absent`, `unreadable`: no value, `total` 0; `returned`: a new base, no delta).
pub(crate) const PORT_COUNTERS: Table = Table {
    name: "port_counters",
    columns: with_batch![
        ("device", "String"),
        ("port", "UInt32"),
        ("counter", "String"),
        ("delta", "UInt64"),
        ("total", "UInt64"),
        ("reset", "String"),
    ],
    key: "host, boot_id, run_id, seq, device, port, counter",
};

/// One row per data-plane record of a QP or a port (a QP's first error at a probe: a
/// completion with an error status, an async error event, the QP moved to error; the `peer`
/// class never records), its record's `idx` in `records`. `status`: the code's name
/// (`IB_WC_RETRY_EXC_ERR`, `IB_EVENT_QP_FATAL`, `IB_QPS_ERR`); `qpn` and `port`: the record's
/// arguments (a port event's `qpn` is 0). The `peer_` columns: the QP's remote side as its
/// last RTR set it (`peer_gid` '' without a global route header; `peer_gid_type` `ib`,
/// `roce-v1`, `roce-v2`, `unknown`, or '' when no peer is known: then `peer_qpn`, `qp_type`,
/// `since_rtr_ns` are 0 and ''); `since_rtr_ns`: from that RTR to the first error. With
/// `--provider-probes`, also a row per QP's first error completion the user-space provider saw
/// (class `provider`, `function` dump_cqe, `module` libmlx5, `probe` 4294967295, `port` 0,
/// `status` the `IBV_WC_*` the provider reports), in the window that saw it.
pub(crate) const QP_ERRORS: Table = Table {
    name: "qp_errors",
    columns: with_batch![
        ("idx", "UInt32"),
        ("probe", "UInt32"),
        ("function", "String"),
        ("module", "String"),
        ("class", "String"),
        ("status", "String"),
        ("qpn", "UInt32"),
        ("port", "UInt32"),
        ("pid", "UInt32"),
        ("comm", "String"),
        ("cgroup", "String"),
        ("job_id", "String"),
        ("job_keys", "Array(String)"),
        ("job_values", "Array(String)"),
        ("peer_qpn", "UInt32"),
        ("peer_gid", "String"),
        ("peer_gid_type", "String"),
        ("qp_type", "String"),
        ("since_rtr_ns", "UInt64"),
        ("ts_ns", "UInt64"),
    ],
    key: "host, boot_id, run_id, seq, idx",
};

/// The tables of a batch: the order of its frame's bodies and of the bits of the tables that
/// took it (a spool file's name), so a table keeps its place across versions: `baselines`,
/// then `port_counters`, then `qp_errors`, added later, are last.
pub(crate) const TABLES: [&Table; 7] = [
    &RECORDS,
    &CHAINS,
    &COUNTERS,
    &SNAPSHOTS,
    &BASELINES,
    &PORT_COUNTERS,
    &QP_ERRORS,
];

/// The order a batch's tables are inserted in, indices in [`TABLES`]: `snapshots` last, so a
/// batch with its `snapshots` row is complete.
pub(crate) const INSERT_ORDER: [usize; 7] = [0, 1, 2, 4, 5, 6, 3];

/// Columns whose values are few names repeated across rows (a fleet has a few kernels, a
/// manifest's few hundred functions, a few errno names): dictionary-encoded.
const LOW_CARDINALITY: [&str; 27] = [
    "host",
    "class",
    "status",
    "peer_gid_type",
    "qp_type",
    "device",
    "counter",
    "reset",
    "kernel",
    "manifest_hash",
    "function",
    "module",
    "errno_name",
    "owner",
    "owner_site",
    "origin_function",
    "origin_module",
    "origin_errno_name",
    "comm",
    "handler",
    "shape",
    "expected_why",
    "bifurcation_after",
    "bifurcation_baseline_next",
    "bifurcation_this_next",
    "bifurcation_baseline_next_layer",
    "bifurcation_this_next_layer",
];
/// Arrays of such names.
const LOW_CARDINALITY_ARRAYS: [&str; 4] = ["functions", "modules", "errno_names", "job_keys"];
/// Counters that grow by one along the sort key (batch, snapshot, record sequence).
const STEPS: [&str; 3] = ["seq", "snapshot", "rec_seq"];

/// A column's type (and codec, on a `MergeTree` table: `codecs`) for `server`.
pub(crate) fn column_type(name: &str, ty: &str, server: ServerVersion, codecs: bool) -> String {
    if !server.has_low_cardinality() {
        return ty.to_string();
    }
    let ty = match ty {
        "String" if LOW_CARDINALITY.contains(&name) => "LowCardinality(String)".to_string(),
        "Array(String)" if LOW_CARDINALITY_ARRAYS.contains(&name) => {
            "Array(LowCardinality(String))".to_string()
        }
        t => t.to_string(),
    };
    if !codecs || !server.has_codecs() {
        return ty;
    }
    let codec = if STEPS.contains(&name) {
        "DoubleDelta, ZSTD(1)"
    } else if name.ends_with("_ns") {
        "Delta, ZSTD(1)"
    } else if name == "summary" {
        "ZSTD(3)"
    } else {
        "ZSTD(1)"
    };
    format!("{ty} CODEC({codec})")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaOptions {
    pub database: String,
    /// `Distributed` tables over `<name>_local` on this cluster (`remote_servers`)
    pub cluster: Option<String>,
    /// retention in days (0: no TTL, required for ClickHouse older than 19.6)
    pub ttl_days: u32,
    /// the oldest server release the DDL must load on (types and codecs follow it)
    pub server: ServerVersion,
    /// a Buffer table in front of each table (`<name>_buffer`), for servers without
    /// asynchronous inserts: many hosts' small inserts become few parts
    pub buffer: bool,
}

/// The name suffix of the Buffer tables (`schema --buffer`, `collect --clickhouse-buffer`).
pub(crate) const BUFFER_SUFFIX: &str = "_buffer";

/// Buffer engine parameters: 16 layers, each flushed to the table once 5 s, 1,000 rows and
/// 1 MiB are all reached, or when 60 s, 100,000 rows or 64 MiB is (ClickHouse's guidance: an
/// insert a second or so per table, thousands of rows each).
const BUFFER_ENGINE: &str = "16, 5, 60, 1000, 100000, 1048576, 67108864";

fn ident_ok(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The options' errors: names that are not identifiers, a TTL the server lacks.
fn check(o: &SchemaOptions) -> Result<(), String> {
    if !ident_ok(&o.database) {
        return Err(format!("database `{}`: expected [A-Za-z0-9_]+", o.database));
    }
    if let Some(c) = &o.cluster {
        if !ident_ok(c) {
            return Err(format!("cluster `{c}`: expected [A-Za-z0-9_]+"));
        }
    }
    if o.ttl_days > 0 && !o.server.has_ttl() {
        return Err(format!(
            "--ttl-days needs ClickHouse 19.6 or later (--server-version is {})",
            o.server
        ));
    }
    Ok(())
}

/// The DDL, statements separated by `;\n\n` (feed it to `clickhouse-client --multiquery`).
pub fn ddl(o: &SchemaOptions) -> Result<String, crate::ClickhouseError> {
    check(o).map_err(crate::ClickhouseError::Schema)?;
    let db = &o.database;
    let mut s = String::new();
    s.push_str(&format!(
        "-- probegen fleet tables (probegen schema --clickhouse --server-version {}{}{}).\n\
         -- ReplacingMergeTree keyed by (host, boot_id, run_id, seq, position): a batch the collector\n\
         -- sent twice (a retry after a timeout) is one row per key after a merge; query with\n\
         -- FINAL for exact counts before it.\n",
        o.server,
        o.cluster
            .as_deref()
            .map(|c| format!(" --cluster {c}"))
            .unwrap_or_default(),
        if o.ttl_days > 0 {
            format!(" --ttl-days {}", o.ttl_days)
        } else {
            " --ttl-days 0".into()
        }
    ));
    if o.cluster.is_some() {
        s.push_str(
            "-- Cluster: run this on every node (no ON CLUSTER: that needs ZooKeeper); the\n\
             -- collectors insert into the Distributed tables, sharded by host.\n",
        );
    }
    if o.ttl_days == 0 {
        s.push_str(
            "-- No TTL (ClickHouse older than 19.6 has none): drop old partitions by day.\n",
        );
    }
    s.push_str(&format!("\nCREATE DATABASE IF NOT EXISTS {db};\n"));
    for t in TABLES {
        let local = match &o.cluster {
            Some(_) => format!("{}_local", t.name),
            None => t.name.to_string(),
        };
        s.push_str(&format!("\nCREATE TABLE IF NOT EXISTS {db}.{local}\n(\n"));
        for (c, ty) in t.columns {
            s.push_str(&format!(
                "    {c} {},\n",
                column_type(c, ty, o.server, true)
            ));
        }
        s.push_str(
            "    time DateTime MATERIALIZED toDateTime(intDiv(time_ns, 1000000000))\n)\n\
             ENGINE = ReplacingMergeTree()\nPARTITION BY toYYYYMMDD(time)\n",
        );
        s.push_str(&format!("ORDER BY ({})\n", t.key));
        if o.ttl_days > 0 {
            s.push_str(&format!("TTL time + INTERVAL {} DAY\n", o.ttl_days));
        }
        s.push_str(";\n");
        if let Some(c) = &o.cluster {
            let engine = format!("Distributed({c}, {db}, {local}, cityHash64(host))");
            s.push_str(&forwarding_table(o, t, t.name, &engine));
        }
        if o.buffer {
            // in front of the table the collectors insert into (the Distributed one on a
            // cluster)
            let name = format!("{}{BUFFER_SUFFIX}", t.name);
            let engine = format!("Buffer({db}, {}, {BUFFER_ENGINE})", t.name);
            s.push_str(&forwarding_table(o, t, &name, &engine));
        }
    }
    Ok(s)
}

/// `schema --clickhouse --upgrade`: what a fleet's existing tables need for this version,
/// then the whole DDL (its `CREATE ... IF NOT EXISTS` adds the new tables and leaves the
/// others). The `chains` columns each version added ([`CHAINS_ADDED`]) go into every `chains`
/// table there is (the one that holds the rows, and the Distributed and Buffer ones in front
/// of it), one `ALTER` per version, the newest first: on a server without `ADD COLUMN IF NOT
/// EXISTS` a table that has some of them stops the run at the first version it already has,
/// after the newer ones were added.
pub fn upgrade(o: &SchemaOptions) -> Result<String, crate::ClickhouseError> {
    let full = ddl(o)?;
    let db = &o.database;
    let if_not = o.server.has_add_column_if_not_exists();
    let mut s = format!(
        "-- probegen schema --clickhouse --upgrade: tables made by an earlier version.\n\
         -- `chains` gained the baseline's columns (collect --baseline), then the layer of the\n\
         -- bifurcation's next functions; `baselines`, `port_counters` and `qp_errors` are new\n\
         -- (created by the CREATE ... IF NOT EXISTS below).\n{}",
        if if_not {
            "-- IF NOT EXISTS: running it again changes nothing.\n"
        } else {
            "-- ClickHouse before 20.1 has no ADD COLUMN IF NOT EXISTS (18.16 refuses it): the\n\
             -- newest columns come first, and the first ALTER that fails with Code 44 (`column\n\
             -- with this name already exists`) is of a version that table has already: it is\n\
             -- upgraded; load `probegen schema --clickhouse` (the CREATE statements below, all\n\
             -- IF NOT EXISTS) for the rest.\n"
        }
    );
    let mut tables = vec![match &o.cluster {
        Some(_) => format!("{}_local", CHAINS.name),
        None => CHAINS.name.to_string(),
    }];
    if o.cluster.is_some() {
        tables.push(CHAINS.name.to_string());
    }
    if o.buffer {
        tables.push(format!("{}{BUFFER_SUFFIX}", CHAINS.name));
    }
    let mut end = CHAINS.columns.len();
    let mut groups = Vec::new();
    for &(what, n) in CHAINS_ADDED.iter().rev() {
        groups.push((what, &CHAINS.columns[end - n..end]));
        end -= n;
    }
    for (what, added) in groups {
        s.push_str(&format!("\n-- {what}\n"));
        for (i, t) in tables.iter().enumerate() {
            // codecs only where the rows are stored (as in the DDL)
            let codecs = i == 0;
            let adds: Vec<String> = added
                .iter()
                .map(|(c, ty)| {
                    format!(
                        "    ADD COLUMN {}{c} {}",
                        if if_not { "IF NOT EXISTS " } else { "" },
                        column_type(c, ty, o.server, codecs)
                    )
                })
                .collect();
            s.push_str(&format!("ALTER TABLE {db}.{t}\n{};\n", adds.join(",\n")));
        }
    }
    s.push('\n');
    s.push_str(&full);
    Ok(s)
}

/// A table that holds no rows of its own and forwards them to another (`Distributed`,
/// `Buffer`): `time` is an ALIAS there, since such a table forwards its MATERIALIZED columns
/// on insert and the table behind refuses them.
fn forwarding_table(o: &SchemaOptions, t: &Table, name: &str, engine: &str) -> String {
    let mut s = format!("\nCREATE TABLE IF NOT EXISTS {}.{name}\n(\n", o.database);
    for (c, ty) in t.columns {
        s.push_str(&format!(
            "    {c} {},\n",
            column_type(c, ty, o.server, false)
        ));
    }
    s.push_str(&format!(
        "    time DateTime ALIAS toDateTime(intDiv(time_ns, 1000000000))\n)\n\
         ENGINE = {engine};\n"
    ));
    s
}

/// The statements of a DDL text, one by one (the HTTP interface takes one per request).
pub fn statements(ddl: &str) -> Vec<String> {
    ddl.split(";\n")
        .map(|st| {
            st.lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .map(|st| st.trim().to_string())
        .filter(|st| !st.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_server_ddl() {
        let d = ddl(&SchemaOptions {
            database: "probegen".into(),
            cluster: None,
            ttl_days: 0,
            buffer: false,
            server: ServerVersion::DEBIAN_BOOKWORM,
        })
        .expect("ddl");
        let st = statements(&d);
        assert_eq!(st.len(), 1 + TABLES.len(), "{d}");
        assert!(!d.contains("LowCardinality") && !d.contains("CODEC"), "{d}");
        assert_eq!(st[0], "CREATE DATABASE IF NOT EXISTS probegen");
        assert!(st[1].starts_with("CREATE TABLE IF NOT EXISTS probegen.records\n("));
        assert!(!d.contains("TTL time") && !d.contains("Distributed"));
        for t in TABLES {
            assert!(d.contains(&format!("ORDER BY ({})", t.key)));
            // every table starts with the batch columns: the idempotency key is in them
            assert!(t.columns.starts_with(&BATCH));
        }
    }

    #[test]
    fn cluster_and_ttl_ddl() {
        let d = ddl(&SchemaOptions {
            database: "fleet".into(),
            cluster: Some("gpu".into()),
            ttl_days: 90,
            buffer: true,
            server: ServerVersion::new(26, 9),
        })
        .expect("ddl");
        let st = statements(&d);
        // the database, and per table: local, Distributed, Buffer in front of it
        assert_eq!(st.len(), 1 + 3 * TABLES.len(), "{d}");
        assert!(d.contains("CREATE TABLE IF NOT EXISTS fleet.chains_local\n("));
        assert!(d.contains(
            "ENGINE = Buffer(fleet, chains, 16, 5, 60, 1000, 100000, 1048576, 67108864);"
        ));
        assert!(d.contains("CREATE TABLE IF NOT EXISTS fleet.chains\n("));
        assert!(d.contains(
            "    time DateTime ALIAS toDateTime(intDiv(time_ns, 1000000000))\n)\nENGINE = Distributed(gpu, fleet, chains_local, cityHash64(host));"
        ));
        // current releases: dictionary-encoded names, codecs on the local tables only
        assert!(
            d.contains("    host LowCardinality(String) CODEC(ZSTD(1)),\n"),
            "{d}"
        );
        assert!(
            d.contains("    seq UInt64 CODEC(DoubleDelta, ZSTD(1)),\n"),
            "{d}"
        );
        assert!(
            d.contains("    time_ns UInt64 CODEC(Delta, ZSTD(1)),\n"),
            "{d}"
        );
        assert!(d.contains("    functions Array(LowCardinality(String)) CODEC(ZSTD(1)),\n"));
        assert!(d.contains(
            "CREATE TABLE IF NOT EXISTS fleet.chains\n(\n    host LowCardinality(String),\n"
        ));
        assert!(ddl(&SchemaOptions {
            database: "a".into(),
            cluster: None,
            ttl_days: 30,
            buffer: false,
            server: ServerVersion::DEBIAN_BOOKWORM,
        })
        .is_err_and(|e| e.to_string().contains("19.6")));
        assert_eq!(
            d.matches("TTL time + INTERVAL 90 DAY").count(),
            TABLES.len()
        );
        assert!(ddl(&SchemaOptions {
            database: "a;b".into(),
            cluster: None,
            ttl_days: 0,
            buffer: false,
            server: ServerVersion::DEBIAN_BOOKWORM,
        })
        .is_err());
        assert!(ddl(&SchemaOptions {
            database: "a".into(),
            cluster: Some("x y".into()),
            ttl_days: 0,
            buffer: false,
            server: ServerVersion::DEBIAN_BOOKWORM,
        })
        .is_err());
    }

    #[test]
    fn upgrade_adds_the_baseline_columns_to_every_chains_table() {
        let o = |cluster: Option<&str>, buffer: bool, server: ServerVersion| SchemaOptions {
            database: "fleet".into(),
            cluster: cluster.map(str::to_string),
            ttl_days: 0,
            buffer,
            server,
        };
        let plain = o(None, false, ServerVersion::DEBIAN_BOOKWORM);
        let up = upgrade(&plain).expect("upgrade");
        let st = statements(&up);
        // the ALTERs, newest first, then the whole DDL (which creates `baselines`)
        assert_eq!(st[2..], statements(&ddl(&plain).expect("ddl"))[..]);
        assert_eq!(
            st[0],
            "ALTER TABLE fleet.chains\n    ADD COLUMN bifurcation_baseline_next_layer String,\n    \
             ADD COLUMN bifurcation_this_next_layer String"
        );
        assert_eq!(
            st[1],
            "ALTER TABLE fleet.chains\n    ADD COLUMN expected UInt8,\n    \
             ADD COLUMN expected_why String,\n    ADD COLUMN bifurcation_after String,\n    \
             ADD COLUMN bifurcation_baseline_next String,\n    \
             ADD COLUMN bifurcation_share Float64,\n    \
             ADD COLUMN bifurcation_this_next String,\n    ADD COLUMN bifurcation_shape String"
        );
        // every column added once, and every column the DDL has beyond the first version's
        let added: usize = CHAINS_ADDED.iter().map(|a| a.1).sum();
        assert_eq!(up.matches("    ADD COLUMN ").count(), added, "{up}");
        assert_eq!(
            &CHAINS.columns[CHAINS.columns.len() - 2..],
            [
                ("bifurcation_baseline_next_layer", "String"),
                ("bifurcation_this_next_layer", "String")
            ]
        );
        // 18.16 has no IF NOT EXISTS: said, not used
        assert!(!up.contains("IF NOT EXISTS expected") && up.contains("Code 44"));
        let big = o(Some("gpu"), true, ServerVersion::new(26, 9));
        let st = statements(&upgrade(&big).expect("upgrade"));
        let alters: Vec<&String> = st.iter().filter(|s| s.starts_with("ALTER")).collect();
        assert_eq!(alters.len(), 3 * CHAINS_ADDED.len());
        let tables = ["chains_local", "chains", "chains_buffer"];
        for (i, a) in alters.iter().enumerate() {
            let t = tables[i % 3];
            assert!(a.starts_with(&format!("ALTER TABLE fleet.{t}\n")), "{a}");
            // the newest version's columns first
            let n = CHAINS_ADDED[CHAINS_ADDED.len() - 1 - i / 3].1;
            assert_eq!(a.matches("ADD COLUMN IF NOT EXISTS ").count(), n, "{a}");
        }
        // codecs where the rows are stored only, as in the DDL
        assert!(alters[3].contains("expected UInt8 CODEC(ZSTD(1))"));
        assert!(alters[4].contains("expected UInt8,") && !alters[4].contains("CODEC"));
        assert!(
            alters[0].contains("bifurcation_this_next_layer LowCardinality(String) CODEC(ZSTD(1))")
        );
    }

    #[test]
    fn qp_errors_is_the_last_table_in_every_variant_and_upgrade_creates_it() {
        // last: an older frame names a prefix of the tables and still reads
        assert_eq!(TABLES.last().map(|t| t.name), Some("qp_errors"));
        // every table inserted once, `snapshots` last
        let mut order = INSERT_ORDER.to_vec();
        assert_eq!(order.last(), Some(&3));
        order.sort_unstable();
        assert_eq!(order, (0..TABLES.len()).collect::<Vec<_>>());
        let o = |cluster: Option<&str>, buffer: bool, server: ServerVersion| SchemaOptions {
            database: "fleet".into(),
            cluster: cluster.map(str::to_string),
            ttl_days: 0,
            buffer,
            server,
        };
        let old = ddl(&o(None, false, ServerVersion::DEBIAN_BOOKWORM)).expect("ddl");
        assert!(
            old.contains("CREATE TABLE IF NOT EXISTS fleet.qp_errors\n(\n    host String,\n"),
            "{old}"
        );
        assert!(old.contains("    peer_gid_type String,\n    qp_type String,\n"));
        let big = ddl(&o(Some("gpu"), true, ServerVersion::new(26, 9))).expect("ddl");
        for want in [
            "CREATE TABLE IF NOT EXISTS fleet.qp_errors_local\n(",
            "ENGINE = Distributed(gpu, fleet, qp_errors_local, cityHash64(host));",
            "ENGINE = Buffer(fleet, qp_errors, 16, 5, 60, 1000, 100000, 1048576, 67108864);",
            "    status LowCardinality(String) CODEC(ZSTD(1)),\n",
            "    since_rtr_ns UInt64 CODEC(Delta, ZSTD(1)),\n",
        ] {
            assert!(big.contains(want), "{want}: {big}");
        }
        // --upgrade on an existing fleet: its DDL creates the table (IF NOT EXISTS)
        for opts in [
            o(None, false, ServerVersion::DEBIAN_BOOKWORM),
            o(Some("gpu"), true, ServerVersion::new(26, 9)),
        ] {
            let up = statements(&upgrade(&opts).expect("upgrade"));
            let created: Vec<&String> = up
                .iter()
                .filter(|s| s.starts_with("CREATE TABLE IF NOT EXISTS fleet.qp_errors"))
                .collect();
            let want = 1 + usize::from(opts.cluster.is_some()) + usize::from(opts.buffer);
            assert_eq!(created.len(), want, "{up:?}");
            assert!(!up
                .iter()
                .any(|s| s.starts_with("ALTER TABLE fleet.qp_errors")));
        }
    }
}
