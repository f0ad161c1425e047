-- The fleet's baseline (collect --baseline), last 7 days: per handler and success shape (the
-- probed functions the calls entered, in call order: a caller before its callees), the hosts
-- that took that path, its calls, its share of the handler's successes, and duration
-- quantiles over every host's calls. A host of a version before the call order sends its
-- shapes in return order, under other shape ids: they are other rows here, never added to
-- the call order's.
--
-- A host's `baselines` rows are its whole baseline so far, repeated in each batch, and a run
-- with --baseline-state (the package's default) starts from the previous run's: so each host
-- counts once, with its latest batch (the latest run's, per manifest: another probe set's
-- baseline starts empty), and hosts add up. Summing every run's latest batch would count a
-- restored baseline once per restart.
-- Durations: duration_log2[i] counts the calls that took [2^i, 2^(i+1)) ns; hosts add the
-- arrays element-wise (sumForEach) and a quantile is the upper bound of the bucket where the
-- merged count reaches it (at most twice the exact value; 0 when no host has counts, e.g. a
-- state file written before the buckets existed). host_p50_ns: the median of the hosts' own
-- medians (their recent calls, exact).
-- The latest-batch subquery stands twice: 18.16 has no WITH subqueries.
-- On a --cluster deployment run it with distributed_product_mode = 'local': rows are
-- sharded by host, so each shard holds its hosts' latest batches.
SELECT
    handler,
    shape,
    path,
    hosts,
    calls,
    round(calls / handler_calls, 4) AS share,
    p50_le_ns,
    p90_le_ns,
    p99_le_ns,
    host_p50_ns
FROM
(
    SELECT
        handler,
        shape,
        any(functions) AS path,
        uniqExact(host) AS hosts,
        sum(count) AS calls,
        sumForEach(duration_log2) AS hist,
        arraySum(hist) AS timed,
        arrayCumSum(hist) AS cum,
        if(timed = 0, 0, toUInt64(pow(2, arrayFirstIndex(c -> c >= 0.5 * timed, cum)))) AS p50_le_ns,
        if(timed = 0, 0, toUInt64(pow(2, arrayFirstIndex(c -> c >= 0.9 * timed, cum)))) AS p90_le_ns,
        if(timed = 0, 0, toUInt64(pow(2, arrayFirstIndex(c -> c >= 0.99 * timed, cum)))) AS p99_le_ns,
        toUInt64(median(p50_ns)) AS host_p50_ns
    FROM probegen.baselines FINAL
    WHERE (host, run_id, seq) IN
    (
        -- each host's latest batch, per manifest
        SELECT host, run_id, max(seq)
        FROM probegen.baselines
        WHERE time >= now() - INTERVAL 7 DAY
            AND (host, manifest_hash, run_id) IN
            (
                SELECT host, manifest_hash, max(run_id)
                FROM probegen.baselines
                WHERE time >= now() - INTERVAL 7 DAY
                GROUP BY host, manifest_hash
            )
        GROUP BY host, run_id
    )
    GROUP BY handler, shape
) AS per_shape
ALL INNER JOIN
(
    -- the handler's successes over the same batches (a host's are on each of its shape rows)
    SELECT handler, sum(host_successes) AS handler_calls
    FROM
    (
        SELECT host, run_id, handler, any(successes) AS host_successes
        FROM probegen.baselines FINAL
        WHERE (host, run_id, seq) IN
        (
            SELECT host, run_id, max(seq)
            FROM probegen.baselines
            WHERE time >= now() - INTERVAL 7 DAY
                AND (host, manifest_hash, run_id) IN
                (
                    SELECT host, manifest_hash, max(run_id)
                    FROM probegen.baselines
                    WHERE time >= now() - INTERVAL 7 DAY
                    GROUP BY host, manifest_hash
                )
            GROUP BY host, run_id
        )
        GROUP BY host, run_id, handler
    ) AS host_handlers
    GROUP BY handler
) AS per_handler USING (handler)
ORDER BY handler, calls DESC, shape
