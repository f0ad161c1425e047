-- Top failure-chain origins by errno per job, last 7 days (chains of processes without a job
-- variable have job_id '').
-- Expected chains (failures the baseline learned as normal, collect --baseline: a process
-- that then succeeds) are left out: drop `AND expected = 0` to include them.
SELECT
    job_id,
    owner,
    origin_function,
    origin_errno_name,
    sum(count) AS chains,
    uniqExact(host) AS hosts
FROM probegen.chains FINAL
WHERE time >= now() - INTERVAL 7 DAY AND job_id != '' AND expected = 0
GROUP BY job_id, owner, origin_function, origin_errno_name
ORDER BY job_id, chains DESC, origin_function, origin_errno_name
LIMIT 5 BY job_id
