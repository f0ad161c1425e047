-- Tickets by spread (issue 24): the same failure (origin function, errno and the error site
-- that decided its owner) is a different ticket depending on where it is seen, last 7 days:
--
--   ticket      seen                                          goes to (ticket_owner)
--   job         in one job only (on one host or several)      application: the job's configuration
--   host        on one host, across jobs                      the host: resources when the site is a
--                                                             limit's, else device-firmware (device, firmware)
--   regression  on several hosts, all on one kernel, and a    the module of the origin: verbs-core
--               failing host ran another kernel before it     (ib_core, ib_uverbs, header inlines),
--               started (a change)                            else vendor-driver
--   fleet       anything else (many hosts, jobs, kernels)     the site's owner (site_owner)
--
-- The evidence is in the row: chains, jobs (a chain without a job variable counts its
-- process as its job), hosts, the kernels it fails on, the hosts that changed kernel before
-- their first failure and the kernels they changed from, first and last seen. `kernel` is
-- the host's release: for in-tree drivers (rxe, mlx5_ib, ... as Debian ships them) it is
-- the driver's version too.
-- Expected chains (failures the baseline learned as normal, collect --baseline: a process
-- that then succeeds) are left out: drop `AND expected = 0` to include them.
-- Joins: an alias on every subquery (26.x); the right side has one row per host.
SELECT
    ticket,
    multiIf(
        ticket = 'job', 'application',
        ticket = 'host', if(site_owner = 'resources', 'resources', 'device-firmware'),
        ticket = 'regression',
            if(origin_module IN ('ib_core', 'ib_uverbs', 'ib_uverbs_support', 'inline'),
                'verbs-core', 'vendor-driver'),
        site_owner) AS ticket_owner,
    site_owner,
    origin_module,
    origin_function,
    origin_errno_name,
    owner_site,
    chains,
    jobs,
    hosts,
    kernels,
    hosts_changed,
    changed_from,
    toDateTime(intDiv(first_ns, 1000000000)) AS first_seen,
    toDateTime(intDiv(last_ns, 1000000000)) AS last_seen
FROM
(
    SELECT
        origin_module,
        origin_function,
        origin_errno_name,
        owner_site,
        any(site_owner) AS site_owner,
        sum(host_chains) AS chains,
        uniqExactArray(host_jobs) AS jobs,
        count() AS hosts,
        arraySort(groupUniqArrayArray(host_kernels)) AS kernels,
        countIf(length(before) > 0) AS hosts_changed,
        arraySort(groupUniqArrayArray(before)) AS changed_from,
        min(host_first_ns) AS first_ns,
        max(host_last_ns) AS last_ns,
        multiIf(
            jobs = 1, 'job',
            hosts = 1, 'host',
            length(kernels) = 1 AND hosts_changed > 0, 'regression',
            'fleet') AS ticket
    FROM
    (
        -- per failure and host; `before`: the kernels the host ran before its first failure
        -- that it does not fail on
        SELECT
            origin_module, origin_function, origin_errno_name, owner_site, host,
            site_owner, host_chains, host_jobs, host_kernels, host_first_ns, host_last_ns,
            arrayMap(h -> tupleElement(h, 1),
                arrayFilter(h -> tupleElement(h, 2) < host_first_ns
                    AND NOT has(host_kernels, tupleElement(h, 1)), history)) AS before
        FROM
        (
            SELECT
                origin_module, origin_function, origin_errno_name, owner_site, host,
                any(owner) AS site_owner,
                sum(count) AS host_chains,
                groupUniqArray(if(job_id != '', job_id,
                    concat(host, ' ', boot_id, ' pid ', toString(pid)))) AS host_jobs,
                groupUniqArray(kernel) AS host_kernels,
                min(time_ns) AS host_first_ns,
                max(time_ns) AS host_last_ns
            FROM probegen.chains FINAL
            WHERE time >= now() - INTERVAL 7 DAY AND expected = 0
            GROUP BY origin_module, origin_function, origin_errno_name, owner_site, host
        ) AS per_host
        ANY LEFT JOIN
        (
            -- each host's kernels with when it first reported on each (min of repeated
            -- rows is exact without FINAL)
            SELECT host, groupArray((kernel, since_ns)) AS history
            FROM
            (
                SELECT host, kernel, min(time_ns) AS since_ns
                FROM probegen.snapshots
                WHERE time >= now() - INTERVAL 7 DAY
                GROUP BY host, kernel
            ) AS host_kernel_since
            GROUP BY host
        ) AS host_history USING (host)
    ) AS per_host_history
    GROUP BY origin_module, origin_function, origin_errno_name, owner_site
) AS spread
ORDER BY ticket, chains DESC, origin_function, origin_errno_name, owner_site
