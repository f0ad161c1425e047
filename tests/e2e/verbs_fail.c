// verbs_fail: induce three well-known verbs failures on a Soft-RoCE device.
//
//   reg_mr_unmapped      ibv_reg_mr on an mmap'ed-then-munmap'ed range  -> EFAULT
//   create_qp_absurd     ibv_create_qp with absurd capabilities         -> EINVAL
//   modify_qp_reset_rts  ibv_modify_qp RESET -> RTS (invalid transition) -> EINVAL
//
// Prints one line per case on stdout:
//   VF <case> errno=<n> (<NAME>) pid=<pid> MATCH|MISMATCH
// and exits non-zero if any case did not fail with the expected errno.
// Diagnostics (device, addresses) go to stderr.
//
// Usage: verbs_fail [device]   (default: rxe0, else the first device)

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int mismatches;

static const char *errname(int e)
{
	const char *n;

	if (e == 0)
		return "OK";
	n = strerrorname_np(e);
	return n ? n : "?";
}

static void report(const char *name, int err, int want)
{
	int ok = err == want;

	printf("VF %s errno=%d (%s) pid=%d %s\n", name, err, errname(err),
	       (int)getpid(), ok ? "MATCH" : "MISMATCH");
	fflush(stdout);
	if (!ok)
		mismatches++;
}

static void case_reg_mr_unmapped(struct ibv_pd *pd)
{
	size_t len = 1 << 20;
	struct ibv_mr *mr;
	void *addr;
	int err;

	addr = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (addr == MAP_FAILED) {
		perror("mmap");
		report("reg_mr_unmapped", -1, EFAULT);
		return;
	}
	if (munmap(addr, len)) {
		perror("munmap");
		report("reg_mr_unmapped", -1, EFAULT);
		return;
	}
	fprintf(stderr, "verbs_fail: reg_mr_unmapped addr=%p len=%zu\n", addr, len);
	errno = 0;
	mr = ibv_reg_mr(pd, addr, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	err = mr ? 0 : errno;
	if (mr)
		ibv_dereg_mr(mr);
	report("reg_mr_unmapped", err, EFAULT);
}

static void case_create_qp_absurd(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr attr;
	struct ibv_qp *qp;
	int err;

	memset(&attr, 0, sizeof(attr));
	attr.send_cq = cq;
	attr.recv_cq = cq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = 1u << 30;
	attr.cap.max_recv_wr = 1u << 30;
	attr.cap.max_send_sge = 1u << 16;
	attr.cap.max_recv_sge = 1u << 16;
	attr.cap.max_inline_data = 1u << 20;
	errno = 0;
	qp = ibv_create_qp(pd, &attr);
	err = qp ? 0 : errno;
	if (qp)
		ibv_destroy_qp(qp);
	report("create_qp_absurd", err, EINVAL);
}

static void case_modify_qp_reset_rts(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	struct ibv_qp *qp;
	int err;

	memset(&init, 0, sizeof(init));
	init.send_cq = cq;
	init.recv_cq = cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = 4;
	init.cap.max_recv_wr = 4;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &init);
	if (!qp) {
		fprintf(stderr, "verbs_fail: setup ibv_create_qp: %s\n", strerror(errno));
		report("modify_qp_reset_rts", -1, EINVAL);
		return;
	}
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;	/* the QP is in RESET: RESET -> RTS is invalid */
	errno = 0;
	err = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
	if (err < 0)
		err = errno;
	report("modify_qp_reset_rts", err, EINVAL);
	ibv_destroy_qp(qp);
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "rxe0";
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int n, i, repeat;

	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		fprintf(stderr, "verbs_fail: no RDMA device\n");
		return 2;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	if (!dev) {
		if (argc > 1) {
			fprintf(stderr, "verbs_fail: device %s not found\n", want);
			return 2;
		}
		dev = list[0];
	}
	ctx = ibv_open_device(dev);
	if (!ctx) {
		fprintf(stderr, "verbs_fail: ibv_open_device(%s): %s\n",
			ibv_get_device_name(dev), strerror(errno));
		return 2;
	}
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!pd || !cq) {
		fprintf(stderr, "verbs_fail: setup (pd/cq): %s\n", strerror(errno));
		return 2;
	}
	fprintf(stderr, "verbs_fail: device %s pid %d\n", ibv_get_device_name(dev),
		(int)getpid());

	/* VERBS_FAIL_REPEAT: the three cases this many times (a burst of failing calls, as a job
	 * start on many ranks makes; default once) */
	repeat = getenv("VERBS_FAIL_REPEAT") ? atoi(getenv("VERBS_FAIL_REPEAT")) : 1;
	for (i = 0; i < repeat; i++) {
		case_reg_mr_unmapped(pd);
		case_create_qp_absurd(pd, cq);
		case_modify_qp_reset_rts(pd, cq);
	}

	/* VERBS_FAIL_LINGER_MS: stay alive a while, as a training job does, so the collector can
	 * read this process's environment and cgroup while it still exists (default: exit). */
	if (getenv("VERBS_FAIL_LINGER_MS"))
		usleep(1000 * atoi(getenv("VERBS_FAIL_LINGER_MS")));

	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return mismatches ? 1 : 0;
}
