// verbs_baseline: the workload of the good-trace baseline end to end (scripts/e2e-baseline.sh).
// Makes verbs succeed many times, then fail down other paths at different depths, on a
// Soft-RoCE device.
//
//   verbs_baseline DEV success N   N rounds of: reg_mr + dereg_mr of a mapped buffer,
//                                  create_qp, modify_qp RESET -> INIT, destroy_qp
//   verbs_baseline DEV fail        reg_mr of an unmapped range (EFAULT, deep: ib_umem_get),
//                                  modify_qp RESET -> RTS (EINVAL, shallow: the state check),
//                                  reg_mr with an iova whose page offset is not its start
//                                  address's (EINVAL in ib_uverbs_reg_mr, before the driver)
//   verbs_baseline DEV benign N    N rounds of: create_qp with capabilities past the device's
//                                  (EINVAL), then with small ones (succeeds), as an
//                                  application that probes its limits does
//   verbs_baseline DEV burst N     N successful reg_mr, a failing one (EFAULT) every 50th
//
// Prints `VB <what> ok=<n> failed=<n> pid=<pid>` per mode and exits non-zero when a call that
// must succeed failed or one that must fail succeeded.

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int wrong;

static struct ibv_qp *qp_with(struct ibv_pd *pd, struct ibv_cq *cq, unsigned wr, unsigned sge)
{
	struct ibv_qp_init_attr init;

	memset(&init, 0, sizeof(init));
	init.send_cq = cq;
	init.recv_cq = cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = wr;
	init.cap.max_recv_wr = wr;
	init.cap.max_send_sge = sge;
	init.cap.max_recv_sge = sge;
	return ibv_create_qp(pd, &init);
}

static int reg_ok(struct ibv_pd *pd, void *buf, size_t len)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		return 0;
	ibv_dereg_mr(mr);
	return 1;
}

static int reg_unmapped(struct ibv_pd *pd)
{
	size_t len = 1 << 16;
	void *addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;

	if (addr == MAP_FAILED || munmap(addr, len))
		return 0;
	mr = ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	if (mr) {
		ibv_dereg_mr(mr);
		return 0;
	}
	return errno == EFAULT;
}

/* The verbs core's own check, before it calls the driver: the iova must have the start
 * address's offset in its page (ib_uverbs_reg_mr: EINVAL). */
static int reg_misaligned(struct ibv_pd *pd, char *buf)
{
	struct ibv_mr *mr = ibv_reg_mr_iova(pd, buf, 4096, (uintptr_t)buf + 1, IBV_ACCESS_LOCAL_WRITE);

	if (mr) {
		ibv_dereg_mr(mr);
		return 0;
	}
	return errno == EINVAL;
}

static int modify_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = 1;
	attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	return ibv_modify_qp(qp, &attr,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
}

static int modify_rts_from_reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &attr, IBV_QP_STATE) != 0;
}

static void tally(int good, int *ok, int *failed)
{
	if (good)
		(*ok)++;
	else
		(*failed)++;
}

static void success(struct ibv_pd *pd, struct ibv_cq *cq, int n, char *buf)
{
	int i, ok = 0, failed = 0;

	for (i = 0; i < n; i++) {
		struct ibv_qp *qp;

		tally(reg_ok(pd, buf, 1 << 16), &ok, &failed);
		qp = qp_with(pd, cq, 4, 1);
		tally(qp != NULL, &ok, &failed);
		if (qp) {
			tally(modify_init(qp), &ok, &failed);
			ibv_destroy_qp(qp);
		}
	}
	printf("VB success ok=%d failed=%d pid=%d\n", ok, failed, (int)getpid());
	wrong += failed;
}

static void fail(struct ibv_pd *pd, struct ibv_cq *cq, char *buf)
{
	int ok = 0, failed = 0;
	struct ibv_qp *qp;

	tally(reg_unmapped(pd), &failed, &ok);
	tally(reg_misaligned(pd, buf), &failed, &ok);
	qp = qp_with(pd, cq, 4, 1);
	if (qp) {
		tally(modify_rts_from_reset(qp), &failed, &ok);
		ibv_destroy_qp(qp);
	} else {
		ok++;
	}
	/* counted the other way round: `failed` are the calls that failed as they must */
	printf("VB fail ok=%d failed=%d pid=%d\n", ok, failed, (int)getpid());
	wrong += ok;
}

static void benign(struct ibv_pd *pd, struct ibv_cq *cq, int n)
{
	int i, ok = 0, failed = 0;

	for (i = 0; i < n; i++) {
		struct ibv_qp *qp = qp_with(pd, cq, 1u << 30, 1u << 16);

		if (qp) {
			ibv_destroy_qp(qp);
			failed++; /* the absurd one must fail */
		}
		qp = qp_with(pd, cq, 4, 1);
		tally(qp != NULL, &ok, &failed);
		if (qp)
			ibv_destroy_qp(qp);
	}
	printf("VB benign ok=%d failed=%d pid=%d\n", ok, failed, (int)getpid());
	wrong += failed;
}

static void burst(struct ibv_pd *pd, int n, char *buf)
{
	int i, ok = 0, failed = 0, efault = 0;

	for (i = 0; i < n; i++) {
		if (i % 50 == 49)
			efault += reg_unmapped(pd);
		else
			tally(reg_ok(pd, buf, 4096), &ok, &failed);
	}
	printf("VB burst ok=%d failed=%d efault=%d pid=%d\n", ok, failed, efault, (int)getpid());
	wrong += failed + (n / 50 - efault);
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	const char *mode;
	char *buf;
	int n, i, count;

	if (argc < 3) {
		fprintf(stderr, "usage: verbs_baseline DEV success|fail|benign|burst [N]\n");
		return 2;
	}
	mode = argv[2];
	count = argc > 3 ? atoi(argv[3]) : 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "verbs_baseline: device %s not found\n", argv[1]);
		return 2;
	}
	ctx = ibv_open_device(dev);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	buf = aligned_alloc(4096, 1 << 16);
	if (!cq || !buf) {
		fprintf(stderr, "verbs_baseline: setup: %s\n", strerror(errno));
		return 2;
	}
	memset(buf, 1, 1 << 16);
	if (!strcmp(mode, "success"))
		success(pd, cq, count, buf);
	else if (!strcmp(mode, "fail"))
		fail(pd, cq, buf);
	else if (!strcmp(mode, "benign"))
		benign(pd, cq, count);
	else if (!strcmp(mode, "burst"))
		burst(pd, count, buf);
	else {
		fprintf(stderr, "verbs_baseline: unknown mode %s\n", mode);
		return 2;
	}
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return wrong ? 1 : 0;
}
