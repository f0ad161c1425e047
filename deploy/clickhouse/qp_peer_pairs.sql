-- Where do QPs lose their peer: the QPs that died of transport retries exceeded
-- (IB_WC_RETRY_EXC_ERR: the requester got no ACK after its retries), last 24 hours, per
-- (host, remote GID) from the qp_errors table (the peer as the QP's last RTR set it).
-- hosts_towards_gid: the distinct hosts that lost QPs towards that remote GID;
-- gids_from_host: the distinct remote GIDs that host lost QPs towards. Read the verdict:
--   remote side: the same remote GID from several hosts (>= 2) points at what they share
--     towards it: the remote host, its link or a switch on the way;
--   host side: one host towards several remote GIDs (>= 2) points at the host itself (its
--     NIC, cable or switch port);
--   both: the pair is in both patterns (look at the host first if its other GIDs are healthy
--     elsewhere);
--   one pair: one host towards one GID, nothing to compare yet.
-- QPs without a GID (an IB QP within its subnet, or no peer known) are not here. Change the
-- range in both places (INTERVAL 1 DAY) for another one.
SELECT
    host,
    peer_gid,
    qps,
    hosts_towards_gid,
    gids_from_host,
    multiIf(
        hosts_towards_gid >= 2 AND gids_from_host >= 2, 'both',
        hosts_towards_gid >= 2, 'remote side: link, switch or peer host',
        gids_from_host >= 2, 'host side: its NIC or link',
        'one pair') AS verdict,
    last_time
FROM
(
    SELECT host, peer_gid, qps, last_time, hosts_towards_gid
    FROM
    (
        SELECT host, peer_gid, uniqExact(boot_id, qpn) AS qps, max(time) AS last_time
        FROM probegen.qp_errors FINAL
        WHERE time >= now() - INTERVAL 1 DAY AND status = 'IB_WC_RETRY_EXC_ERR'
            AND peer_gid != ''
        GROUP BY host, peer_gid
    ) AS pairs
    ALL INNER JOIN
    (
        SELECT peer_gid, uniqExact(host) AS hosts_towards_gid
        FROM probegen.qp_errors FINAL
        WHERE time >= now() - INTERVAL 1 DAY AND status = 'IB_WC_RETRY_EXC_ERR'
            AND peer_gid != ''
        GROUP BY peer_gid
    ) AS per_gid USING (peer_gid)
) AS pairs_gids
ALL INNER JOIN
(
    SELECT host, uniqExact(peer_gid) AS gids_from_host
    FROM probegen.qp_errors FINAL
    WHERE time >= now() - INTERVAL 1 DAY AND status = 'IB_WC_RETRY_EXC_ERR'
        AND peer_gid != ''
    GROUP BY host
) AS per_host USING (host)
ORDER BY hosts_towards_gid DESC, gids_from_host DESC, host, peer_gid
