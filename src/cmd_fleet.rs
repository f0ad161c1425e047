//! `probegen schema`: the manifest's JSON Schema or (`--clickhouse`) the fleet tables' DDL,
//! shared with the `probegen-agent` binary.

use std::process::ExitCode;

pub(crate) use probegen_agent::SchemaArgs;

pub(crate) fn schema(a: &SchemaArgs) -> Result<ExitCode, String> {
    probegen_agent::schema(a).map_err(|e| e.to_string())
}
