-- Top failure-chain origins by errno over the fleet, last 7 days: where failed RDMA
-- control-path syscalls start, how many hosts and jobs see them, and who gets the ticket.
-- Expected chains (failures the baseline learned as normal, collect --baseline: a process
-- that then succeeds) are left out: drop `AND expected = 0` to include them.
SELECT
    owner,
    origin_module,
    origin_function,
    origin_errno_name,
    sum(count) AS chains,
    uniqExact(host) AS hosts,
    uniqExact(job_id) AS jobs
FROM probegen.chains FINAL
WHERE time >= now() - INTERVAL 7 DAY AND expected = 0
GROUP BY owner, origin_module, origin_function, origin_errno_name
ORDER BY chains DESC, origin_function, origin_errno_name
LIMIT 50
