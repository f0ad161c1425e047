-- Early warning: hosts whose failure-chain rate for an origin and errno is at least 10 times
-- the fleet median, last 24 hours. Rates are chains per hour the host reported (its
-- snapshots' windows), so a host that reported for an hour is not compared by raw count
-- with one that reported all day; hosts with no such chain count as zero in the median.
-- The floor (1 chain per reporting hour) keeps a zero median from flagging one failure.
-- Expected chains (failures the baseline learned as normal, collect --baseline: a process
-- that then succeeds) are left out: drop `AND expected = 0` to include them.
-- Joins are ALL with a right side of one row per key: ANY INNER JOIN keeps one row per key of
-- the left side too on current releases (not on 18.16), which would drop a host's origins.
SELECT
    host,
    owner,
    origin_function,
    origin_errno_name,
    round(chains_per_hour, 1) AS chains_per_hour,
    round(fleet_median, 1) AS fleet_median_per_hour,
    round(chains_per_hour / greatest(fleet_median, 1), 1) AS times_median
FROM
(
    SELECT host, owner, origin_function, origin_errno_name, chains / hours AS chains_per_hour
    FROM
    (
        SELECT host, owner, origin_function, origin_errno_name, sum(count) AS chains
        FROM probegen.chains FINAL
        WHERE time >= now() - INTERVAL 1 DAY AND expected = 0
        GROUP BY host, owner, origin_function, origin_errno_name
    ) AS host_chains
    ALL INNER JOIN
    (
        SELECT host, sum(time_ns - window_start_ns) / 3.6e12 AS hours
        FROM probegen.snapshots FINAL
        WHERE time >= now() - INTERVAL 1 DAY
        GROUP BY host
    ) AS host_hours USING (host)
) AS host_rates
ALL INNER JOIN
(
    -- per origin: the median over every reporting host, zeros included
    SELECT
        owner,
        origin_function,
        origin_errno_name,
        arrayReduce('median',
            arrayConcat(groupArray(rate),
                arrayMap(i -> 0., range(toUInt64(any(n_hosts) - count()))))) AS fleet_median
    FROM
    (
        SELECT host, owner, origin_function, origin_errno_name, chains / hours AS rate
        FROM
        (
            SELECT host, owner, origin_function, origin_errno_name, sum(count) AS chains
            FROM probegen.chains FINAL
            WHERE time >= now() - INTERVAL 1 DAY AND expected = 0
            GROUP BY host, owner, origin_function, origin_errno_name
        ) AS fleet_chains
        ALL INNER JOIN
        (
            SELECT host, sum(time_ns - window_start_ns) / 3.6e12 AS hours
            FROM probegen.snapshots FINAL
            WHERE time >= now() - INTERVAL 1 DAY
            GROUP BY host
        ) AS fleet_hours USING (host)
    ) AS fleet_rates
    CROSS JOIN
    (
        SELECT uniqExact(host) AS n_hosts
        FROM probegen.snapshots FINAL
        WHERE time >= now() - INTERVAL 1 DAY
    ) AS fleet_hosts
    GROUP BY owner, origin_function, origin_errno_name
) AS medians USING (owner, origin_function, origin_errno_name)
WHERE chains_per_hour >= 10 * greatest(fleet_median, 1)
ORDER BY times_median DESC, host, origin_function
