// verbs_dataplane: the workload of the data-plane end to end (scripts/e2e-dataplane.sh).
// Two RC QPs over one Soft-RoCE device (A sends to B, both in this process; the retry mode
// forks B into a child it then kills), each mode inducing one class of error a dying QP
// shows the kernel, or none:
//
//   verbs_dataplane DEV healthy N   N SENDs A -> B with a posted receive each: 2N good
//                                   completions, no error
//   verbs_dataplane DEV rkey        RDMA WRITE with a wrong rkey: IB_WC_REM_ACCESS_ERR on A
//   verbs_dataplane DEV lkey        RDMA WRITE with a wrong lkey: IB_WC_LOC_PROT_ERR on A
//                                   (Soft-RoCE: the QP dies, the request is flushed:
//                                   IB_WC_WR_FLUSH_ERR)
//   verbs_dataplane DEV rnr         SEND with no receive posted, rnr_retry 1:
//                                   IB_WC_RNR_RETRY_EXC_ERR on A
//   verbs_dataplane DEV flush N     the rkey error (a `flush-first` line), then N more writes
//                                   posted to the dead QP: N x IB_WC_WR_FLUSH_ERR on A
//   verbs_dataplane DEV cqoverflow  A's send CQ has one entry; 4 signaled writes unpolled:
//                                   the async event IB_EVENT_CQ_ERR
//   verbs_dataplane DEV retry       B in a child process, killed after 50 good writes; the
//                                   next write: IB_WC_RETRY_EXC_ERR on A (retry_cnt 2)
//   verbs_dataplane DEV provider LIBRARY OFFSET
//                                   libmlx5's own dump_cqe (at OFFSET of LIBRARY, loaded) called
//                                   3 times with an error CQE of A's QP once A is at RTR with its
//                                   peer: what mlx5's poll does for an error completion, for the
//                                   agent's provider uprobe (MLX5_CQE_CALL_WAIT=S first holds the
//                                   library mapped S seconds; mlx5_dump_cqe.h)
//   verbs_dataplane DEV porterr NETDEV
//                                   the async fd open, NETDEV (the one under DEV) set down:
//                                   the async event IB_EVENT_PORT_ERR; then up again, and
//                                   IB_EVENT_PORT_ACTIVE awaited (the port usable after it)
//
// Prints `VD <mode> qpn=0x<A's QP number> status=<kernel name> count=<n> pid=<pid>
// peer=0x<the remote QP number of A's RTR> gid=<its destination GID>` (the kernel's
// enumerator names: the record's `errno_name`; the peer the record must name), and exits 1 when the induced completion or
// event did not come, 2 on a setup failure. GID index 1 (the testbed's RoCE v2 GID), port 1.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "mlx5_dump_cqe.h"

#define BUF 65536
#define GID_INDEX 1

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;   /* receive CQ, and send CQ unless scq is set */
	struct ibv_cq *scq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	uint32_t remote;                  /* the RTR's remote QP number */
	char dgid[INET6_ADDRSTRLEN];      /* and destination GID: the record's peer */
};

/* what one side tells the other to connect and write to it */
struct peer {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

static const char *dev_name;

static const char *wc_name(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return "IB_WC_SUCCESS";
	case IBV_WC_LOC_PROT_ERR: return "IB_WC_LOC_PROT_ERR";
	case IBV_WC_WR_FLUSH_ERR: return "IB_WC_WR_FLUSH_ERR";
	case IBV_WC_REM_ACCESS_ERR: return "IB_WC_REM_ACCESS_ERR";
	case IBV_WC_RETRY_EXC_ERR: return "IB_WC_RETRY_EXC_ERR";
	case IBV_WC_RNR_RETRY_EXC_ERR: return "IB_WC_RNR_RETRY_EXC_ERR";
	case IBV_WC_REM_INV_REQ_ERR: return "IB_WC_REM_INV_REQ_ERR";
	case IBV_WC_LOC_QP_OP_ERR: return "IB_WC_LOC_QP_OP_ERR";
	case IBV_WC_LOC_LEN_ERR: return "IB_WC_LOC_LEN_ERR";
	default: return "other";
	}
}

static void die(const char *what)
{
	fprintf(stderr, "verbs_dataplane: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n, i;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "verbs_dataplane: device %s not found\n", dev_name);
		exit(2);
	}
	return ctx;
}

/* a side with its own PD, MR and CQ (cq_depth); send_cq_depth > 0: a separate send CQ */
static void side_init(struct side *s, struct ibv_context *ctx, int cq_depth, int send_cq_depth)
{
	struct ibv_qp_init_attr init;

	memset(s, 0, sizeof(*s));
	s->ctx = ctx;
	s->pd = ibv_alloc_pd(ctx);
	if (!s->pd)
		die("alloc_pd");
	s->buf = aligned_alloc(4096, BUF);
	if (!s->buf)
		die("alloc");
	memset(s->buf, 7, BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	s->cq = ibv_create_cq(ctx, cq_depth, NULL, NULL, 0);
	if (!s->mr || !s->cq)
		die("reg_mr/create_cq");
	if (send_cq_depth > 0) {
		s->scq = ibv_create_cq(ctx, send_cq_depth, NULL, NULL, 0);
		if (!s->scq)
			die("create_cq (send)");
	}
	memset(&init, 0, sizeof(init));
	init.send_cq = s->scq ? s->scq : s->cq;
	init.recv_cq = s->cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 256;
	init.cap.max_recv_wr = 256;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(s->pd, &init);
	if (!s->qp)
		die("create_qp");
}

static struct peer peer_of(const struct side *s)
{
	struct peer p = { s->qp->qp_num, s->mr->rkey, (uintptr_t)s->buf };

	return p;
}

/* RESET -> INIT -> RTR -> RTS towards `remote`, with the RTS's retry counts and timeout */
static void connect_qp(struct side *s, uint32_t remote, int timeout, int retry, int rnr_retry)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;

	if (ibv_query_gid(s->ctx, 1, GID_INDEX, &gid))
		die("query_gid");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify RTR");
	s->remote = remote;
	if (!inet_ntop(AF_INET6, gid.raw, s->dgid, sizeof(s->dgid)))
		die("inet_ntop");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = rnr_retry;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify RTS");
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* one completion of cq within 10 s; its status, or -1 when none came */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = now() + 10;
	int n;

	while (now() < end) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
	}
	return -1;
}

static int post_write(struct side *s, const struct peer *to, uint32_t lkey, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, 64, lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = to->addr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(s->qp, &wr, &bad);
}

static int post_send(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, 64, s->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(s->qp, &wr, &bad);
}

static int post_recv(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + 4096, 4096, s->mr->lkey };
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(s->qp, &wr, &bad);
}

static void report(const char *mode, const struct side *a, const char *status, int count)
{
	printf("VD %s qpn=0x%x status=%s count=%d pid=%d peer=0x%x gid=%s\n", mode, a->qp->qp_num,
	       status, count, (int)getpid(), a->remote, a->dgid[0] ? a->dgid : "none");
}

/*
 * An error completion comes before the provider has moved the QP to the error state on some
 * kernels (7.2's rxe: the completer reports, then errors the QP); a job that exits at once
 * destroys a QP that never died. Wait until the kernel says the QP is in error (at most 2 s).
 */
static void await_error_state(const char *mode, struct side *a)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	int i;

	for (i = 0; i < 200; i++) {
		if (ibv_query_qp(a->qp, &attr, IBV_QP_STATE, &init))
			die("query_qp");
		if (attr.qp_state == IBV_QPS_ERR)
			return;
		usleep(10000);
	}
	printf("VD %s WRONG: QP 0x%x not in the error state 2 s after its error completion\n", mode,
	       a->qp->qp_num);
	exit(1);
}

/* the one completion an induced error gives: the wanted status (or `also`), else exit 1 */
static void expect_either(const char *mode, struct side *a, enum ibv_wc_status want,
			  enum ibv_wc_status also)
{
	struct ibv_wc wc;
	int s = poll_one(a->scq ? a->scq : a->cq, &wc);

	if (s >= 0 && s == (int)also)
		want = also;
	if (s != (int)want) {
		printf("VD %s WRONG: got %s (%d), wanted %s\n", mode,
		       s < 0 ? "no completion" : wc_name(s), s, wc_name(want));
		exit(1);
	}
	await_error_state(mode, a);
	report(mode, a, wc_name(want), 1);
}

static void expect(const char *mode, struct side *a, enum ibv_wc_status want)
{
	expect_either(mode, a, want, want);
}

static int healthy(struct side *a, struct side *b, int n)
{
	struct ibv_wc wc;
	int i, good = 0;

	for (i = 0; i < n; i++) {
		if (post_recv(b) || post_send(a))
			die("post");
		good += poll_one(a->cq, &wc) == IBV_WC_SUCCESS;
		good += poll_one(b->cq, &wc) == IBV_WC_SUCCESS;
	}
	report("healthy", a, "IB_WC_SUCCESS", good);
	return good == 2 * n ? 0 : 1;
}

static int flush(struct side *a, const struct peer *pb, int n)
{
	struct ibv_wc wc;
	int i, flushed = 0;

	if (post_write(a, pb, a->mr->lkey, pb->rkey ^ 0x5a5a00))
		die("post");
	expect("flush-first", a, IBV_WC_REM_ACCESS_ERR);
	for (i = 0; i < n; i++)
		if (post_write(a, pb, a->mr->lkey, pb->rkey))
			die("post after the error");
	for (i = 0; i < n; i++)
		flushed += poll_one(a->cq, &wc) == IBV_WC_WR_FLUSH_ERR;
	report("flush", a, "IB_WC_WR_FLUSH_ERR", flushed);
	return flushed == n ? 0 : 1;
}

/* Async events until `want` arrives or `secs` pass: how many of `want` came. */
static int await_event(struct ibv_context *ctx, enum ibv_event_type want, double secs)
{
	struct ibv_async_event ev;
	struct pollfd pfd = { ctx->async_fd, POLLIN, 0 };
	double end = now() + secs;
	int seen = 0;

	if (fcntl(pfd.fd, F_SETFL, fcntl(pfd.fd, F_GETFL) | O_NONBLOCK))
		die("async fd");
	while (!seen && now() < end) {
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		while (ibv_get_async_event(ctx, &ev) == 0) {
			seen += ev.event_type == want;
			ibv_ack_async_event(&ev);
		}
	}
	return seen;
}

/* the async events of ctx for up to 3 s: 0 when IBV_EVENT_CQ_ERR came */
static int cq_overflow(struct side *a, const struct peer *pb)
{
	int i, seen;

	for (i = 0; i < 4; i++)
		if (post_write(a, pb, a->mr->lkey, pb->rkey))
			die("post");
	seen = await_event(a->ctx, IBV_EVENT_CQ_ERR, 3);
	report("cqoverflow", a, seen ? "IB_EVENT_CQ_ERR" : "none", seen);
	return seen ? 0 : 1;
}

/* The netdev under the device set down while this context's async fd is open: the port
 * error event; then up again and the port active once more. */
static int port_error(struct side *a, const char *netdev)
{
	char cmd[128];
	int down, up;

	snprintf(cmd, sizeof(cmd), "ip link set dev %s down", netdev);
	if (system(cmd))
		die("ip link set down");
	down = await_event(a->ctx, IBV_EVENT_PORT_ERR, 5);
	report("porterr", a, down ? "IB_EVENT_PORT_ERR" : "none", down);
	snprintf(cmd, sizeof(cmd), "ip link set dev %s up", netdev);
	if (system(cmd))
		die("ip link set up");
	up = await_event(a->ctx, IBV_EVENT_PORT_ACTIVE, 10);
	printf("VD porterr-up active=%d\n", up);
	return down && up ? 0 : 1;
}

/* B in a child: connects to A, then waits to be killed */
static int retry(struct side *a)
{
	int up[2], down[2];
	struct peer pb;
	uint32_t aqpn = a->qp->qp_num;
	struct ibv_wc wc;
	pid_t child;
	int i, good = 0;

	if (pipe(up) || pipe(down))
		die("pipe");
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		struct side b;
		struct peer me;
		uint32_t remote;
		char ok = 1;

		side_init(&b, open_dev(), 64, 0);
		me = peer_of(&b);
		if (write(up[1], &me, sizeof(me)) != sizeof(me) ||
		    read(down[0], &remote, sizeof(remote)) != sizeof(remote))
			_exit(2);
		connect_qp(&b, remote, 14, 7, 7);
		if (write(up[1], &ok, 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	if (read(up[0], &pb, sizeof(pb)) != sizeof(pb) ||
	    write(down[1], &aqpn, sizeof(aqpn)) != sizeof(aqpn))
		die("exchange");
	/* timeout 10 (4 ms) and 2 retries: the dead peer is given up in well under a second */
	connect_qp(a, pb.qpn, 10, 2, 7);
	if (read(up[0], &i, 1) != 1)
		die("peer ready");
	for (i = 0; i < 50; i++) {
		if (post_write(a, &pb, a->mr->lkey, pb.rkey))
			die("post");
		good += poll_one(a->cq, &wc) == IBV_WC_SUCCESS;
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	printf("VD retry good=%d before the peer was killed\n", good);
	if (post_write(a, &pb, a->mr->lkey, pb.rkey))
		die("post");
	expect("retry", a, IBV_WC_RETRY_EXC_ERR);
	return good == 50 ? 0 : 1;
}

/* the provider's error path for A's QP, three times (a dying QP's completions), then alive 3 s */
static int provider(struct side *a, const char *lib, unsigned long off)
{
	void *fn = pg_dump_cqe_of(lib, off);

	if (!fn)
		return 2;
	sleep(getenv("MLX5_CQE_CALL_WAIT") ? (unsigned)atoi(getenv("MLX5_CQE_CALL_WAIT")) : 0);
	pg_call_dump_cqe(fn, a->qp->qp_num, 0x4, 0x99, 3);
	report("provider", a, "IBV_WC_LOC_PROT_ERR", 3);
	sleep(3);
	return 0;
}

int main(int argc, char **argv)
{
	struct side a, b;
	struct peer pb;
	const char *mode;
	int n, rc = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: verbs_dataplane DEV healthy|rkey|lkey|rnr|flush|cqoverflow|retry|porterr|provider [N|NETDEV|LIBRARY OFFSET]\n");
		return 2;
	}
	dev_name = argv[1];
	mode = argv[2];
	n = argc > 3 ? atoi(argv[3]) : 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	side_init(&a, open_dev(), 256, !strcmp(mode, "cqoverflow") ? 1 : 0);
	if (!strcmp(mode, "retry")) {
		rc = retry(&a);
		goto out;
	}
	if (!strcmp(mode, "porterr")) {
		if (argc < 4) {
			fprintf(stderr, "verbs_dataplane: porterr needs the netdev under %s\n", dev_name);
			return 2;
		}
		rc = port_error(&a, argv[3]);
		goto out;
	}
	side_init(&b, a.ctx, 256, 0);
	pb = peer_of(&b);
	connect_qp(&b, a.qp->qp_num, 14, 7, 7);
	connect_qp(&a, b.qp->qp_num, 14, 7, !strcmp(mode, "rnr") ? 1 : 7);
	if (!strcmp(mode, "healthy")) {
		rc = healthy(&a, &b, n);
	} else if (!strcmp(mode, "rkey")) {
		if (post_write(&a, &pb, a.mr->lkey, pb.rkey ^ 0x5a5a00))
			die("post");
		expect(mode, &a, IBV_WC_REM_ACCESS_ERR);
	} else if (!strcmp(mode, "lkey")) {
		if (post_write(&a, &pb, a.mr->lkey ^ 0x5a5a00, pb.rkey))
			die("post");
		/* Soft-RoCE moves the QP to error and flushes the failed request with the rest:
		 * IB_WC_WR_FLUSH_ERR (6.12, 7.2), where hardware reports IB_WC_LOC_PROT_ERR */
		expect_either(mode, &a, IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR);
	} else if (!strcmp(mode, "rnr")) {
		if (post_send(&a))
			die("post");
		expect(mode, &a, IBV_WC_RNR_RETRY_EXC_ERR);
	} else if (!strcmp(mode, "flush")) {
		rc = flush(&a, &pb, n);
	} else if (!strcmp(mode, "cqoverflow")) {
		rc = cq_overflow(&a, &pb);
	} else if (!strcmp(mode, "provider") && argc > 4) {
		rc = provider(&a, argv[3], strtoul(argv[4], NULL, 0));
	} else {
		fprintf(stderr, "verbs_dataplane: unknown mode %s\n", mode);
		return 2;
	}
out:
	/* alive a moment longer: the collector reads the job from /proc/<pid> as records come */
	usleep(500000);
	return rc;
}
