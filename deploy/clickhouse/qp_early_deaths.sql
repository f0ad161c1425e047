-- QPs that die early: the first error within 10 s of the RTR that set the QP's peer
-- (since_rtr_ns < 10000000000; change it for another N), last 7 days, by host, the GID type
-- of the QP's path (ib, roce-v1, roce-v2, unknown) and status. A QP that never carries
-- traffic is a configuration problem, not a flaky link: a RoCE v1 GID towards a peer in
-- another subnet (v1 is not routable), a wrong GID index (a v1 or link-local GID where the
-- fabric needs v2), a wrong remote QP number or GID exchanged out of band. qps: distinct QPs
-- (boot, QP number); median_ms: the median time from RTR to the first error; peer_gids: the
-- remote GIDs. QPs without a known peer (peer_gid_type '') are left out: their
-- since_rtr_ns is 0, not a time.
SELECT
    host,
    peer_gid_type,
    status,
    uniqExact(boot_id, qpn) AS qps,
    round(median(since_rtr_ns) / 1e6, 1) AS median_ms,
    arraySort(groupUniqArray(peer_gid)) AS peer_gids
FROM probegen.qp_errors FINAL
WHERE time >= now() - INTERVAL 7 DAY AND peer_gid_type != ''
    AND since_rtr_ns < 10000000000
GROUP BY host, peer_gid_type, status
ORDER BY host, peer_gid_type, status
