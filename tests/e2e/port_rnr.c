// port_rnr: moves a real port error counter of a Soft-RoCE device, for the collector's
// port_counters (scripts/e2e/collect-hook.sh reads hw_counters/ before and after it). Two RC
// QPs on one device, connected to each other (GID index 1, the testbed's RoCE v2 GID); A
// sends to B with no receive posted on B and rnr_retry 0: B's responder answers an RNR NAK
// (send_rnr_err +1), A's completer takes it (rcvd_rnr_err +1) with no retry left
// (retry_rnr_exceeded_err +1) and completes the SEND with IBV_WC_RNR_RETRY_EXC_ERR
// (rxe_resp.c, rxe_comp.c of 6.12).
//
// Prints `PR rnr status=<ibv_wc_status_str> qpn=0x<A's QP number>` and exits 0 when the
// completion is the RNR retry error, 1 when another or none came, 2 on a setup failure.
//
// Usage: port_rnr [device]   (default: rxe0)

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define GID_INDEX 1

static int die(const char *what)
{
	fprintf(stderr, "port_rnr: %s failed\n", what);
	return 2;
}

static struct ibv_context *open_dev(const char *want)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	int n, i;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	ctx = dev ? ibv_open_device(dev) : NULL;
	ibv_free_device_list(list);
	return ctx;
}

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		return NULL;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS))
		return NULL;
	return qp;
}

/* INIT -> RTR -> RTS towards `remote` on this device; rnr_retry 0: the first RNR NAK ends it */
static int connect_qp(struct ibv_qp *qp, uint32_t remote, const union ibv_gid *gid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 0;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(int argc, char **argv)
{
	static char buf[64];
	struct ibv_context *ctx = open_dev(argc > 1 ? argv[1] : "rxe0");
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	union ibv_gid gid;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	time_t until;
	int n = 0;

	if (!ctx)
		return die("opening the device");
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	mr = cq ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		return die("pd, cq or mr");
	a = rc_qp(pd, cq);
	b = rc_qp(pd, cq);
	if (!a || !b)
		return die("the QPs");
	if (ibv_query_gid(ctx, 1, GID_INDEX, &gid))
		return die("ibv_query_gid");
	if (connect_qp(a, b->qp_num, &gid) || connect_qp(b, a->qp_num, &gid))
		return die("connecting the QPs");
	/* no receive posted on B */
	memset(&sge, 0, sizeof(sge));
	sge.addr = (uintptr_t)buf;
	sge.length = sizeof(buf);
	sge.lkey = mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(a, &wr, &bad))
		return die("ibv_post_send");
	until = time(NULL) + 20;
	while (n == 0 && time(NULL) < until)
		n = ibv_poll_cq(cq, 1, &wc);
	if (n <= 0) {
		printf("PR rnr status=none qpn=0x%x\n", a->qp_num);
		return 1;
	}
	printf("PR rnr status=%s qpn=0x%x\n", ibv_wc_status_str(wc.status), a->qp_num);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return wc.status == IBV_WC_RNR_RETRY_EXC_ERR ? 0 : 1;
}
