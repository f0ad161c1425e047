#!/usr/bin/env bash
# The fleet questions' latency on 30 days of 1,000 hosts (issue 26 item 3): starts Debian's
# clickhouse-server (18.16) on loopback, creates the tables (`schema --clickhouse`), generates
# the data inside ClickHouse (INSERT ... SELECT from numbers(): the paper's rate scaled to 1,000
# hosts and 30 days, 8.2 M failure records in incidents of 200 records, a chain per 3 records,
# a heartbeat row per host every 300 s), merges, then times every deploy/clickhouse/*.sql
# (best of 3, clickhouse-client --time) and prints the row counts.
#
# Usage: benches/fleet_questions.sh [RECORDS]   (default 8200000; QUESTIONS=DIR times the
# .sql files of DIR instead, e.g. a question beside its earlier text)
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-8200000}
PORT=${PORT:-28127} TCP=${TCP:-29004}
. benches/clickhouse.sh
start_clickhouse fleet-questions
cargo build --release --quiet --bin probegen
target/release/probegen schema --clickhouse | ch --multiquery

# 30 days back from now; incident k on host cityHash64(k) % 1000 at a time spread over them;
# its records chains of 3 (ib_uverbs_reg_mr <- rxe_reg_user_mr <- ib_umem_get, EFAULT), one job
# per host and day
NOW=$(date +%s)
START=$((NOW - 30 * 86400))
INCIDENTS=$((RECORDS / 200))
ch --query "INSERT INTO probegen.records (host, boot_id, run_id, seq, kernel, manifest_hash, snapshot, time_ns, idx, probe, function, module, errno, errno_name, pid, tid, comm, cgroup, cgroup_id, job_id, job_keys, job_values, args, ts_ns, cpu, rec_seq)
SELECT concat('sim-', toString(h)), concat('boot-', toString(h)), 1, k, '6.12.117+deb12-amd64', 'sha256:c11c', k, t, j,
  2 - j % 3, ['ib_umem_get', 'rxe_reg_user_mr', 'ib_uverbs_reg_mr'][j % 3 + 1], ['ib_uverbs', 'rdma_rxe', 'ib_uverbs'][j % 3 + 1],
  14, 'EFAULT', 1000 + intDiv(j, 3) % 8, 1000 + intDiv(j, 3) % 8, 'trainer', '', 1, job, ['SLURM_JOB_ID'], [job], [toUInt64(140000000000 + j)], t, 0, number
FROM (SELECT number, intDiv(number, 200) AS k, number % 200 AS j, cityHash64(k) % 1000 AS h,
  toUInt64(($START + (k * 2654435761) % (30 * 86400)) * 1000000000 + j * 1000) AS t,
  toString(h * 100 + intDiv(toUInt64(t / 1000000000) - $START, 86400)) AS job
  FROM numbers($RECORDS))"
ch --query "INSERT INTO probegen.chains (host, boot_id, run_id, seq, kernel, manifest_hash, snapshot, time_ns, idx, owner, errno, errno_name, pid, tid, comm, origin_function, origin_module, origin_probe, origin_errno, origin_errno_name, functions, modules, link_probes, link_errnos, start_ns, end_ns, count, last_end_ns, summary, job_id, job_keys, job_values)
SELECT host, boot_id, run_id, seq, kernel, manifest_hash, snapshot, time_ns + 2000, intDiv(idx, 3), 'application', 14, 'EFAULT', pid, tid, comm,
  'ib_umem_get', 'ib_uverbs', 2, 14, 'EFAULT', ['ib_uverbs_reg_mr', 'rxe_reg_user_mr', 'ib_umem_get'], ['ib_uverbs', 'rdma_rxe', 'ib_uverbs'],
  [0, 1, 2], [14, 14, 14], time_ns, time_ns + 2000, 1, time_ns + 2000, 'ib_uverbs_reg_mr <- rxe_reg_user_mr <- ib_umem_get EFAULT', job_id, job_keys, job_values
FROM probegen.records WHERE idx % 3 = 0"
BEATS=$((1000 * 30 * 288))
ch --query "INSERT INTO probegen.snapshots (host, boot_id, run_id, seq, kernel, manifest_hash, snapshot, time_ns, is_final, window_start_ns, records, chains, drops_kernel, drops_userspace, seq_gaps, decode_errors, spool_dropped, invariant_ok)
SELECT concat('sim-', toString(number % 1000)), concat('boot-', toString(number % 1000)), 1, 1000000 + intDiv(number, 1000), '6.12.117+deb12-amd64', 'sha256:c11c',
  1000000 + intDiv(number, 1000), toUInt64($START + 300 * (intDiv(number, 1000) + 1)) * 1000000000, 0, toUInt64($START + 300 * intDiv(number, 1000)) * 1000000000, 0, 0, 0, 0, 0, 0, 0, 1
FROM numbers($BEATS)"
for t in records chains counters snapshots; do ch --query "OPTIMIZE TABLE probegen.$t FINAL" >/dev/null; done
echo "data: records $(ch --query 'SELECT count() FROM probegen.records'), chains $(ch --query 'SELECT count() FROM probegen.chains'), snapshots $(ch --query 'SELECT count() FROM probegen.snapshots'); parts $(ch --query 'SELECT count() FROM system.parts WHERE active AND database = '"'"'probegen'"'"''), bytes $(ch --query 'SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '"'"'probegen'"'"'')"
JOB=$(ch --query 'SELECT any(job_id) FROM probegen.records')
for f in "${QUESTIONS:-deploy/clickhouse}"/*.sql; do
  sql=$(sed "s/{job_id:String}/'$JOB'/g" "$f")
  best=
  for _ in 1 2 3; do
    s=$( { ch --time --format Null --query "$sql" >/dev/null; } 2>&1 | tail -n 1)
    best=$(awk -v a="${best:-999}" -v b="$s" 'BEGIN { print (b < a ? b : a) }')
  done
  rows=$(ch --format TSV --query "$sql" | wc -l)
  printf '%-22s %6.3f s  (%s rows)\n' "$(basename "$f")" "$best" "$rows"
done
