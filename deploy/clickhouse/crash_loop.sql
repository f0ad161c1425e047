-- Hosts in a crash loop: the same failure-chain origin (and errno) at the start of at least 3
-- consecutive jobs on one host, last 7 days. A job starts at its first record on the host;
-- "at the start" is its first chain, within 60 s of that.
-- Expected chains (failures the baseline learned as normal, collect --baseline: a process
-- that then succeeds) are left out: drop `AND expected = 0` to include them.
-- No FINAL: a batch sent twice only repeats rows, and min/argMin of repeated rows are the same,
-- so the answer is exact without the merge-on-read that FINAL costs over 7 days of records.
SELECT
    host,
    origin,
    count() AS consecutive_jobs,
    groupArray(job_id) AS jobs
FROM
(
    SELECT host, job_id, origin, run
    FROM
    (
        SELECT
            host,
            arraySort(j -> tupleElement(j, 1), groupArray((start_ns, job_id, origin))) AS js,
            arrayMap(j -> tupleElement(j, 2), js) AS job_ids,
            arrayMap(j -> tupleElement(j, 3), js) AS origins,
            -- consecutive jobs with the same origin share a run number
            arrayCumSum(arrayMap(i -> (i = 1 OR origins[i] != origins[i - 1]) ? 1 : 0,
                arrayEnumerate(origins))) AS runs
        FROM
        (
            SELECT host, job_id, start_ns,
                if(first_chain_ns <= start_ns + 60000000000, first_origin, '') AS origin
            FROM
            (
                SELECT host, job_id, min(time_ns) AS start_ns
                FROM probegen.records
                WHERE time >= now() - INTERVAL 7 DAY AND job_id != ''
                GROUP BY host, job_id
            ) AS job_starts
            ANY LEFT JOIN
            (
                SELECT host, job_id, min(time_ns) AS first_chain_ns,
                    argMin(concat(origin_function, ' ', origin_errno_name), time_ns) AS first_origin
                FROM probegen.chains
                WHERE time >= now() - INTERVAL 7 DAY AND job_id != '' AND expected = 0
                GROUP BY host, job_id
            ) AS first_chains USING (host, job_id)
        )
        GROUP BY host
    )
    ARRAY JOIN job_ids AS job_id, origins AS origin, runs AS run
)
WHERE origin != ''
GROUP BY host, run, origin
HAVING consecutive_jobs >= 3
ORDER BY consecutive_jobs DESC, host, origin
