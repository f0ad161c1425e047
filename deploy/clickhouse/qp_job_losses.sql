-- Which jobs lose QPs: per job (job_id, the first of SLURM_JOB_ID, TORCHELASTIC_RUN_ID,
-- JOB_ID the QP owner's process had), last 7 days, from the qp_errors table (a QP's first
-- error at each data-plane probe: an error completion, an async error event, the QP moved to
-- error). hosts: the job's hosts that lost QPs; qps: distinct QPs (host, boot, QP number; a
-- port's event, QP 0, is not one); records: the rows (one QP often has several: its error
-- completion, then the QP moved to error); statuses: what they died of, sorted; host_list:
-- the hosts. Many hosts of one job with IB_WC_RETRY_EXC_ERR: ask qp_peer_pairs.sql who the
-- peer was. Processes without a job variable (job_id '') are left out.
SELECT
    job_id,
    uniqExact(host) AS hosts,
    uniqExactIf(host, boot_id, qpn, qpn != 0) AS qps,
    count() AS records,
    arraySort(groupUniqArray(status)) AS statuses,
    arraySort(groupUniqArray(host)) AS host_list
FROM probegen.qp_errors FINAL
WHERE time >= now() - INTERVAL 7 DAY AND job_id != ''
GROUP BY job_id
ORDER BY qps DESC, job_id
