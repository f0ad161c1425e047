//! `collect --config FILE`: `key = value` lines whose keys are `collect`'s long flags; each
//! becomes `--key=value` unless the command line names that flag (the command line wins).
//! A line that is not `key = value`, names a key no flag has, or holds a value its flag would
//! refuse is one line `FILE:LINE: ...` and exit 2, before anything starts. The ClickHouse
//! password has no key: it comes through `LoadCredential=` or `--clickhouse-password-file`.

use std::ffi::OsString;

use crate::flags::{parse_duration, parse_listen};
use crate::AgentError;

/// What a key's value must be.
#[derive(Clone, Copy)]
enum Value {
    Duration,
    Count,
    /// A path or free text (checked by the flag itself when the run starts).
    Text,
    /// `true` or `false`: a switch flag.
    Switch,
    /// `true` or `false`: a flag that takes it (`--key=false`), on by default.
    Bool,
    Listen,
}

/// The keys a config file may set, with their value kind.
const KEYS: &[(&str, Value)] = &[
    ("bundle", Value::Text),
    ("nearest-set", Value::Bool),
    ("manifest", Value::Text),
    ("object", Value::Text),
    ("interval", Value::Duration),
    ("drain", Value::Duration),
    ("idle-wait", Value::Duration),
    ("out", Value::Text),
    ("rotate-bytes", Value::Count),
    ("rotate-keep", Value::Count),
    ("metrics", Value::Listen),
    ("strict", Value::Switch),
    ("ringbuf-bytes", Value::Count),
    ("batch-cap", Value::Count),
    ("job-vars", Value::Text),
    ("proc-root", Value::Text),
    ("clickhouse", Value::Text),
    ("clickhouse-password-file", Value::Text),
    ("clickhouse-timeout", Value::Duration),
    ("clickhouse-spool", Value::Text),
    ("clickhouse-spool-bytes", Value::Count),
    ("clickhouse-flush", Value::Duration),
    ("clickhouse-heartbeat", Value::Duration),
    ("clickhouse-buffer", Value::Switch),
    ("host", Value::Text),
    ("control", Value::Text),
    ("baseline", Value::Switch),
    ("baseline-sample", Value::Count),
    ("baseline-budget", Value::Count),
    ("baseline-max", Value::Duration),
    ("baseline-expected", Value::Text),
    ("baseline-not-expected", Value::Text),
    ("baseline-state", Value::Text),
    ("baseline-state-bytes", Value::Count),
    ("baseline-ringbuf-bytes", Value::Count),
    ("baseline-entry", Value::Text),
    ("provider-probes", Value::Switch),
    ("provider-object", Value::Text),
    ("provider-table", Value::Text),
    ("provider-rescan", Value::Count),
];

/// The arguments with `collect --config FILE`'s lines added as flags (unchanged without it).
pub fn expand_config(args: Vec<OsString>) -> Result<Vec<OsString>, AgentError> {
    // the subcommand is the first argument (neither binary has global flags)
    let at = 1;
    if args.get(at).is_none_or(|a| a != "collect") {
        return Ok(args);
    }
    let file = args[at..].iter().enumerate().find_map(|(i, a)| {
        let s = a.to_str()?;
        if s == "--config" {
            args.get(at + i + 1).cloned()
        } else {
            s.strip_prefix("--config=").map(OsString::from)
        }
    });
    let Some(file) = file else {
        return Ok(args);
    };
    let path = std::path::PathBuf::from(&file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| AgentError::Usage(format!("--config {}: {e}", path.display())))?;
    let given = |key: &str| {
        let flag = format!("--{key}");
        args[at..].iter().any(|a| {
            a.to_str()
                .is_some_and(|s| s == flag || s.starts_with(&format!("{flag}=")))
        })
    };
    let mut added = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let where_ = format!("{}:{}", path.display(), n + 1);
        let Some((key, value)) = parse_line(line).map_err(|e| usage(&where_, e))? else {
            continue;
        };
        let Some(&(_, kind)) = KEYS.iter().find(|(k, _)| *k == key) else {
            let names: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(usage(
                &where_,
                format!("unknown key `{key}`: expected one of {}", names.join(", ")),
            ));
        };
        check_value(key, value, kind).map_err(|e| usage(&where_, e))?;
        if given(key) {
            continue;
        }
        match kind {
            Value::Switch if value == "true" => added.push(OsString::from(format!("--{key}"))),
            Value::Switch => {}
            _ => added.push(OsString::from(format!("--{key}={value}"))),
        }
    }
    let mut out = args;
    out.splice(at + 1..at + 1, added);
    Ok(out)
}

fn usage(where_: &str, what: String) -> AgentError {
    AgentError::Usage(format!("{where_}: {what}"))
}

/// `key = value` (spaces around `=` optional), or `None` for a blank or `#` comment line.
fn parse_line(line: &str) -> Result<Option<(&str, &str)>, String> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let Some((key, value)) = t.split_once('=') else {
        return Err(format!("`{t}`: expected `key = value`"));
    };
    Ok(Some((key.trim(), value.trim())))
}

fn check_value(key: &str, value: &str, kind: Value) -> Result<(), String> {
    match kind {
        Value::Duration => parse_duration(value).map(drop).map_err(|e| e.to_string()),
        Value::Count => value
            .parse::<u64>()
            .map(drop)
            .map_err(|_| format!("{key} `{value}`: expected a whole number")),
        Value::Listen => parse_listen(value).map(drop).map_err(|e| e.to_string()),
        Value::Switch | Value::Bool if value == "true" || value == "false" => Ok(()),
        Value::Switch | Value::Bool => Err(format!("{key} `{value}`: expected true or false")),
        Value::Text if value.is_empty() && key != "job-vars" => {
            Err(format!("{key}: expected a value"))
        }
        Value::Text => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn lines_become_flags_and_the_command_line_wins() {
        let dir = std::env::temp_dir().join(format!("pg-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("probegen.conf");
        std::fs::write(
            &f,
            "# comment\n\ninterval = 10s\nout=/var/lib/probegen/s.jsonl\nstrict = true\njob-vars =\nnearest-set = false\n",
        )
        .expect("write");
        let c = f.display().to_string();
        let got =
            expand_config(args(&["a", "collect", "--config", &c, "--interval", "1s"])).expect("ok");
        assert_eq!(
            got,
            args(&[
                "a",
                "collect",
                "--out=/var/lib/probegen/s.jsonl",
                "--strict",
                "--job-vars=",
                "--nearest-set=false",
                "--config",
                &c,
                "--interval",
                "1s"
            ])
        );
        std::fs::write(&f, "interval = 10s\nintervall = 5s\n").expect("write");
        let e = expand_config(args(&["a", "collect", &format!("--config={c}")]))
            .expect_err("unknown key")
            .to_string();
        assert!(
            e.starts_with(&format!("{c}:2: unknown key `intervall`")),
            "{e}"
        );
        std::fs::write(&f, "interval = soon\n").expect("write");
        let e = expand_config(args(&["a", "collect", "--config", &c]))
            .expect_err("bad value")
            .to_string();
        assert!(
            e.starts_with(&format!("{c}:1: `soon` is not a duration")),
            "{e}"
        );
        std::fs::write(&f, "just words\n").expect("write");
        let e = expand_config(args(&["a", "collect", "--config", &c]))
            .expect_err("no =")
            .to_string();
        assert!(
            e.contains(":1: `just words`: expected `key = value`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
