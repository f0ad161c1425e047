-- The failure records of one job with the owner of the chain each belongs to (a record's
-- chain is found by host, boot, process, thread, probe and errno: a retry storm's repeated
-- chains share them). Parameter job_id: `clickhouse-client --param_job_id=1234` on
-- ClickHouse >= 19.4; on older servers replace {job_id:String} by a quoted literal.
-- `host IN` lets FINAL read only the job's hosts' granules (host leads the sort key): 0.3 s
-- instead of 6 s on 30 days of 1,000 hosts (benches/fleet_questions.sh; GLOBAL IN reads
-- everything on 18.16). On a `--cluster` deployment run it with
-- `distributed_product_mode = 'local'` (clickhouse-client --distributed_product_mode=local):
-- the tables are sharded by host, so each shard's own rows name the job's hosts there.
SELECT
    time,
    host,
    pid,
    tid,
    comm,
    module,
    function,
    errno_name,
    owner
FROM
(
    SELECT time, time_ns, idx, host, boot_id, pid, tid, comm, probe AS l_probe,
        errno AS l_errno, module, function, errno_name
    FROM probegen.records FINAL
    WHERE job_id = {job_id:String}
        AND host IN (SELECT host FROM probegen.records WHERE job_id = {job_id:String})
) AS job_recs
ANY LEFT JOIN
(
    SELECT DISTINCT host, boot_id, pid, tid, l_probe, l_errno, owner
    FROM probegen.chains FINAL
    ARRAY JOIN link_probes AS l_probe, link_errnos AS l_errno
    WHERE job_id = {job_id:String}
        AND host IN (SELECT host FROM probegen.chains WHERE job_id = {job_id:String})
) AS chain_links USING (host, boot_id, pid, tid, l_probe, l_errno)
ORDER BY time_ns, host, idx
