// probe_cost_verbs: the verbs traffic of benches/probe_cost.sh, in the qemu guest.
//
//   probe_cost_verbs DEVICE ok N     N x (ibv_reg_mr of a mapped 4 KiB page, ibv_dereg_mr):
//                                    ib_uverbs_reg_mr and what it calls succeed (success path)
//   probe_cost_verbs DEVICE fail N   N x ibv_reg_mr of an mmap'ed-then-munmap'ed 1 MiB range:
//                                    EFAULT from ib_umem_get up (failure path; the same
//                                    induction as tests/e2e/verbs_fail.c reg_mr_unmapped)
//   probe_cost_verbs DEVICE qp N     N x (ibv_create_qp of an RC QP, ibv_destroy_qp)
//   probe_cost_verbs DEVICE modify N N x ibv_modify_qp RESET -> INIT -> RESET of one RC QP
//
// Prints `PC <mode> n=<N> unexpected=<k> us_per_iter=<t>` and exits 1 when any iteration did
// not end as expected (a success that failed, a failure that was not EFAULT).

#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <infiniband/verbs.h>

/* qp and modify: N iterations of the QP verbs; returns the unexpected ones */
static long qp_loop(struct ibv_context *ctx, struct ibv_pd *pd, int modify, long n)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { 0 };
	struct ibv_qp_attr a;
	struct ibv_qp *qp = NULL;
	long i, bad = 0;

	if (!cq)
		return n;
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	if (modify && !(qp = ibv_create_qp(pd, &ia)))
		return n;
	for (i = 0; i < n; i++) {
		if (!modify) {
			qp = ibv_create_qp(pd, &ia);
			bad += !qp || ibv_destroy_qp(qp);
			continue;
		}
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
		bad += !!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						       IBV_QP_ACCESS_FLAGS);
		a.qp_state = IBV_QPS_RESET;
		bad += !!ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	if (qp && modify)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	return bad;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	const char *mode;
	long n, i, unexpected = 0;
	size_t len;
	char *addr, *end;
	double t0, t1;
	int cnt, ok;

	if (argc != 4 || (strcmp(argv[2], "ok") && strcmp(argv[2], "fail") &&
			  strcmp(argv[2], "qp") && strcmp(argv[2], "modify"))) {
		fprintf(stderr, "usage: %s DEVICE ok|fail|qp|modify N\n", argv[0]);
		return 2;
	}
	mode = argv[2];
	ok = !strcmp(mode, "ok");
	n = strtol(argv[3], &end, 10);
	if (*end || n <= 0) {
		fprintf(stderr, "probe_cost_verbs: bad N %s\n", argv[3]);
		return 2;
	}
	list = ibv_get_device_list(&cnt);
	for (i = 0; list && i < cnt; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "probe_cost_verbs: device %s not found\n", argv[1]);
		return 2;
	}
	ctx = ibv_open_device(dev);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		fprintf(stderr, "probe_cost_verbs: open/alloc_pd: %s\n", strerror(errno));
		return 2;
	}
	if (!strcmp(mode, "qp") || !strcmp(mode, "modify")) {
		t0 = now_us();
		unexpected = qp_loop(ctx, pd, !strcmp(mode, "modify"), n);
		t1 = now_us();
		printf("PC %s n=%ld unexpected=%ld us_per_iter=%.1f\n", mode, n, unexpected,
		       (t1 - t0) / n);
		return unexpected ? 1 : 0;
	}
	len = ok ? 4096 : 1 << 20;
	addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (addr == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (ok)
		memset(addr, 1, len);
	else if (munmap(addr, len)) {
		perror("munmap");
		return 2;
	}
	t0 = now_us();
	for (i = 0; i < n; i++) {
		struct ibv_mr *mr;

		errno = 0;
		mr = ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (mr) {
			unexpected += !ok;
			ibv_dereg_mr(mr);
		} else {
			unexpected += ok || errno != EFAULT;
		}
	}
	t1 = now_us();
	printf("PC %s n=%ld unexpected=%ld us_per_iter=%.1f\n", mode, n, unexpected,
	       (t1 - t0) / n);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return unexpected ? 1 : 0;
}
