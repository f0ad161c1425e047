// owner_fail: the labeled set of induced failures on a Soft-RoCE device. Each case runs in a
// child process of its own (its pid names the case in the collector's chains), makes the
// objects it needs, then one verbs call that must fail. The label is the owner a senior RDMA
// engineer would give the failure (who has to act), decided before any run:
//
//   application      the caller asked for something invalid: bad arguments, capabilities
//                    over the device's limits, an illegal QP transition, unmapped,
//                    read-only or misaligned memory
//   resources        a limit was reached: RLIMIT_MEMLOCK without CAP_IPC_LOCK, the job's rdma
//                    cgroup `rdma.max`
//
// Prints one line per case on stdout:
//   OF <case> owner=<label> errno=<n> (<NAME>) pid=<pid> FAILED|NOFAIL|SKIP
// FAILED: the call failed (the collector must have a chain for the pid); NOFAIL: it succeeded
// (the case is not induced on this kernel: listed, not counted); SKIP: the setup could not be
// made (no rdma cgroup controller, ...), with why on stderr.
//
// Usage: owner_fail [device]   (default: rxe0)

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static const char *devname_want = "rxe0";

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

/* A case: its name, its label, its body (returns the errno of the failing call, 0 when it
 * succeeded, -1 when the setup failed). */
struct ocase {
	const char *name;
	const char *owner;
	int (*run)(struct env *e);
	/* set up before the device is opened (limits, cgroup, uid); NULL: none */
	int (*before)(void);
	/* the environment is the open device only (no PD, no CQ) */
	int bare;
};

static const char *errname(int e)
{
	const char *n;

	if (e == 0)
		return "OK";
	n = strerrorname_np(e);
	return n ? n : "?";
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	int n, i;

	list = ibv_get_device_list(&n);
	if (!list || n == 0)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname_want))
			dev = list[i];
	if (!dev)
		dev = list[0];
	ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	return ctx;
}

static void *page_buf(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int mr_err(struct ibv_mr *mr)
{
	int err = mr ? 0 : errno;

	if (mr)
		ibv_dereg_mr(mr);
	return err;
}

static struct ibv_qp *rc_qp(struct env *e)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = e->cq;
	a.recv_cq = e->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 4;
	a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return ibv_create_qp(e->pd, &a);
}

static int qp_err(struct ibv_qp *qp)
{
	int err = qp ? 0 : errno;

	if (qp)
		ibv_destroy_qp(qp);
	return err;
}

static int modify_err(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int err;

	errno = 0;
	err = ibv_modify_qp(qp, a, mask);
	if (err < 0)
		err = errno;
	ibv_destroy_qp(qp);
	return err;
}

/* --- memory registration ------------------------------------------------------------ */

static int reg_mr_unmapped(struct env *e)
{
	size_t len = 1 << 20;
	void *p = page_buf(len, PROT_READ | PROT_WRITE);

	if (!p || munmap(p, len))
		return -1;
	return mr_err(ibv_reg_mr(e->pd, p, len, IBV_ACCESS_LOCAL_WRITE));
}

static int reg_mr_readonly_for_write(struct env *e)
{
	void *p = page_buf(1 << 16, PROT_READ);

	if (!p)
		return -1;
	return mr_err(ibv_reg_mr(e->pd, p, 1 << 16, IBV_ACCESS_LOCAL_WRITE));
}

static int reg_mr_remote_write_without_local(struct env *e)
{
	void *p = page_buf(1 << 16, PROT_READ | PROT_WRITE);

	if (!p)
		return -1;
	return mr_err(ibv_reg_mr(e->pd, p, 1 << 16, IBV_ACCESS_REMOTE_WRITE));
}

static int reg_mr_iova_misaligned(struct env *e)
{
	char *p = page_buf(1 << 16, PROT_READ | PROT_WRITE);

	if (!p)
		return -1;
	/* the buffer starts at a page offset of 0, the I/O address at 1: not the same offset */
	return mr_err(ibv_reg_mr_iova(e->pd, p, 4096, (uint64_t)(uintptr_t)p + 1,
				      IBV_ACCESS_LOCAL_WRITE));
}

static int reg_mr_address_wraps(struct env *e)
{
	return mr_err(ibv_reg_mr(e->pd, (void *)(uintptr_t)0xfffffffffffff000ull, 0x2000,
				 IBV_ACCESS_LOCAL_WRITE));
}

static int reg_mr_unmapped_hole(struct env *e)
{
	/* the first page mapped, the rest a hole */
	size_t len = 1 << 20;
	char *p = page_buf(len, PROT_READ | PROT_WRITE);

	if (!p || munmap(p + 4096, len - 4096))
		return -1;
	return mr_err(ibv_reg_mr(e->pd, p, len, IBV_ACCESS_LOCAL_WRITE));
}

/* --- QP creation ------------------------------------------------------------------- */

static int create_qp_caps(struct env *e, unsigned swr, unsigned rwr, unsigned ssge,
			  unsigned rsge, unsigned inl, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = e->cq;
	a.recv_cq = e->cq;
	a.qp_type = type;
	a.cap.max_send_wr = swr;
	a.cap.max_recv_wr = rwr;
	a.cap.max_send_sge = ssge;
	a.cap.max_recv_sge = rsge;
	a.cap.max_inline_data = inl;
	errno = 0;
	return qp_err(ibv_create_qp(e->pd, &a));
}

static int create_qp_send_wr_over_limit(struct env *e)
{
	return create_qp_caps(e, 1u << 30, 4, 1, 1, 0, IBV_QPT_RC);
}

static int create_qp_recv_wr_over_limit(struct env *e)
{
	return create_qp_caps(e, 4, 1u << 30, 1, 1, 0, IBV_QPT_RC);
}

static int create_qp_send_sge_over_limit(struct env *e)
{
	return create_qp_caps(e, 4, 4, 1u << 16, 1, 0, IBV_QPT_RC);
}

static int create_qp_recv_sge_over_limit(struct env *e)
{
	return create_qp_caps(e, 4, 4, 1, 1u << 16, 0, IBV_QPT_RC);
}

static int create_qp_inline_over_limit(struct env *e)
{
	return create_qp_caps(e, 4, 4, 1, 1, 1u << 20, IBV_QPT_RC);
}

static int create_qp_unsupported_type(struct env *e)
{
	/* rxe does not do XRC send QPs through this path, nor raw packet QPs */
	return create_qp_caps(e, 4, 4, 1, 1, 0, IBV_QPT_RAW_PACKET);
}

/* --- CQs ------------------------------------------------------------------------------ */

static int cq_err(struct ibv_cq *cq)
{
	int err = cq ? 0 : errno;

	if (cq)
		ibv_destroy_cq(cq);
	return err;
}

static int create_cq_over_limit(struct env *e)
{
	errno = 0;
	return cq_err(ibv_create_cq(e->ctx, 1 << 30, NULL, NULL, 0));
}

static int create_cq_bad_vector(struct env *e)
{
	errno = 0;
	return cq_err(ibv_create_cq(e->ctx, 16, NULL, NULL, 1000));
}

static int resize_cq_over_limit(struct env *e)
{
	int err;

	errno = 0;
	err = ibv_resize_cq(e->cq, 1 << 30);
	return err < 0 ? errno : err;
}

/* --- QP transitions and attributes ---------------------------------------------------- */

static int modify_qp_reset_to_rts(struct env *e)
{
	struct ibv_qp *qp = rc_qp(e);
	struct ibv_qp_attr a;

	if (!qp)
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	return modify_err(qp, &a, IBV_QP_STATE);
}

static int modify_qp_reset_to_rtr(struct env *e)
{
	struct ibv_qp *qp = rc_qp(e);
	struct ibv_qp_attr a;

	if (!qp)
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	return modify_err(qp, &a, IBV_QP_STATE);
}

static int modify_qp_init_bad_port(struct env *e)
{
	struct ibv_qp *qp = rc_qp(e);
	struct ibv_qp_attr a;

	if (!qp)
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 9;
	a.pkey_index = 0;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	return modify_err(qp, &a,
			  IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS);
}

static int modify_qp_init_missing_attrs(struct env *e)
{
	struct ibv_qp *qp = rc_qp(e);
	struct ibv_qp_attr a;

	if (!qp)
		return -1;
	/* RESET -> INIT of an RC QP requires port, pkey index and access flags */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	return modify_err(qp, &a, IBV_QP_STATE);
}

static int modify_qp_timeout_over_limit(struct env *e)
{
	struct ibv_qp *qp = rc_qp(e);
	struct ibv_qp_attr a;

	if (!qp)
		return -1;
	memset(&a, 0, sizeof(a));
	a.timeout = 40; /* 5 bits on the wire: at most 31 */
	return modify_err(qp, &a, IBV_QP_TIMEOUT);
}

/* INIT -> RTR with a source GID index that names no GID (index 200 of the port's table of
 * 1024, nothing behind it): rdma_get_gid_attr's ENODATA through rdma_fill_sgid_attr, the
 * NCCL_IB_GID_INDEX mistake. The caller's configuration. */
static int modify_qp_rtr_gid_index_unset(struct env *e)
{
	struct ibv_qp *qp = rc_qp(e);
	struct ibv_qp_attr a;

	if (!qp)
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS)) {
		ibv_destroy_qp(qp);
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 200;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	return modify_err(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MIN_RNR_TIMER);
}

/* --- resources ------------------------------------------------------------------------ */

/* No CAP_IPC_LOCK (uid nobody) and a small RLIMIT_MEMLOCK: a job's ulimit. */
static int memlock_64k_as_nobody(void)
{
	struct rlimit r = { 64 << 10, 64 << 10 };

	return setrlimit(RLIMIT_MEMLOCK, &r);
}

static int memlock_zero_as_nobody(void)
{
	struct rlimit r = { 0, 0 };

	return setrlimit(RLIMIT_MEMLOCK, &r);
}

/* Drop root after the device is open (the uverbs file stays usable). */
static int drop_to_nobody(void)
{
	if (setgid(65534) || setuid(65534))
		return -1;
	return 0;
}

static int reg_mr_over_memlock(struct env *e)
{
	size_t len = 4 << 20;
	void *p = page_buf(len, PROT_READ | PROT_WRITE);

	if (!p || drop_to_nobody())
		return -1;
	return mr_err(ibv_reg_mr(e->pd, p, len, IBV_ACCESS_LOCAL_WRITE));
}

static const char *cg = "/sys/fs/cgroup/owner-fail-rdma";

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* A job's rdma cgroup: two contexts, one object. */
static int join_rdma_cgroup(void)
{
	char buf[128];

	write_file("/sys/fs/cgroup/cgroup.subtree_control", "+rdma");
	mkdir(cg, 0755);
	snprintf(buf, sizeof(buf), "%s/rdma.max", cg);
	{
		char lim[96];

		snprintf(lim, sizeof(lim), "%s hca_handle=2 hca_object=1", devname_want);
		if (write_file(buf, lim)) {
			fprintf(stderr, "owner_fail: %s: %s (no rdma cgroup controller?)\n", buf,
				strerror(errno));
			return -1;
		}
	}
	snprintf(buf, sizeof(buf), "%s/cgroup.procs", cg);
	{
		char pid[32];

		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		return write_file(buf, pid);
	}
}

static int alloc_pd_over_rdma_cgroup(struct env *e)
{
	struct ibv_pd *first, *pd;

	/* the first PD takes the one object the cgroup allows, the second is over it */
	first = ibv_alloc_pd(e->ctx);
	if (!first)
		return -1;
	errno = 0;
	pd = ibv_alloc_pd(e->ctx);
	if (pd) {
		ibv_dealloc_pd(pd);
		ibv_dealloc_pd(first);
		return 0;
	}
	return errno;
}

static const struct ocase cases[] = {
	{ "reg_mr_unmapped", "application", reg_mr_unmapped, NULL, 0 },
	{ "reg_mr_unmapped_hole", "application", reg_mr_unmapped_hole, NULL, 0 },
	{ "reg_mr_readonly_for_write", "application", reg_mr_readonly_for_write, NULL, 0 },
	{ "reg_mr_remote_write_without_local", "application", reg_mr_remote_write_without_local, NULL, 0 },
	{ "reg_mr_iova_misaligned", "application", reg_mr_iova_misaligned, NULL, 0 },
	{ "reg_mr_address_wraps", "application", reg_mr_address_wraps, NULL, 0 },
	{ "create_qp_send_wr_over_limit", "application", create_qp_send_wr_over_limit, NULL, 0 },
	{ "create_qp_recv_wr_over_limit", "application", create_qp_recv_wr_over_limit, NULL, 0 },
	{ "create_qp_send_sge_over_limit", "application", create_qp_send_sge_over_limit, NULL, 0 },
	{ "create_qp_recv_sge_over_limit", "application", create_qp_recv_sge_over_limit, NULL, 0 },
	{ "create_qp_inline_over_limit", "application", create_qp_inline_over_limit, NULL, 0 },
	{ "create_qp_unsupported_type", "application", create_qp_unsupported_type, NULL, 0 },
	{ "create_cq_over_limit", "application", create_cq_over_limit, NULL, 0 },
	{ "create_cq_bad_vector", "application", create_cq_bad_vector, NULL, 0 },
	{ "resize_cq_over_limit", "application", resize_cq_over_limit, NULL, 0 },
	{ "modify_qp_reset_to_rts", "application", modify_qp_reset_to_rts, NULL, 0 },
	{ "modify_qp_reset_to_rtr", "application", modify_qp_reset_to_rtr, NULL, 0 },
	{ "modify_qp_init_bad_port", "application", modify_qp_init_bad_port, NULL, 0 },
	{ "modify_qp_init_missing_attrs", "application", modify_qp_init_missing_attrs, NULL, 0 },
	{ "modify_qp_timeout_over_limit", "application", modify_qp_timeout_over_limit, NULL, 0 },
	{ "modify_qp_rtr_gid_index_unset", "application", modify_qp_rtr_gid_index_unset, NULL, 0 },
	{ "reg_mr_over_memlock", "resources", reg_mr_over_memlock, memlock_64k_as_nobody, 0 },
	{ "reg_mr_memlock_zero", "resources", reg_mr_over_memlock, memlock_zero_as_nobody, 0 },
	{ "alloc_pd_over_rdma_cgroup", "resources", alloc_pd_over_rdma_cgroup, join_rdma_cgroup, 1 },
};

/* The child: set up, make the environment, run the case; exit status 0 FAILED, 1 NOFAIL,
 * 2 SKIP; the line is printed by the child (its own pid). */
static int child(const struct ocase *c)
{
	struct env e = { 0 };
	int err;

	if (c->before && c->before()) {
		printf("OF %s owner=%s errno=0 (OK) pid=%d SKIP\n", c->name, c->owner, (int)getpid());
		return 2;
	}
	e.ctx = open_dev();
	if (!e.ctx || (!c->bare && (!(e.pd = ibv_alloc_pd(e.ctx)) ||
				    !(e.cq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0))))) {
		fprintf(stderr, "owner_fail: %s: setup: %s\n", c->name, strerror(errno));
		printf("OF %s owner=%s errno=0 (OK) pid=%d SKIP\n", c->name, c->owner, (int)getpid());
		return 2;
	}
	err = c->run(&e);
	if (err < 0) {
		fprintf(stderr, "owner_fail: %s: setup of the case failed\n", c->name);
		printf("OF %s owner=%s errno=0 (OK) pid=%d SKIP\n", c->name, c->owner, (int)getpid());
		return 2;
	}
	printf("OF %s owner=%s errno=%d (%s) pid=%d %s\n", c->name, c->owner, err, errname(err),
	       (int)getpid(), err ? "FAILED" : "NOFAIL");
	return err ? 0 : 1;
}

int main(int argc, char **argv)
{
	size_t i, failed = 0;

	if (argc > 1)
		devname_want = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t pid;
		int st = 0;

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0)
			_exit(child(&cases[i]));
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			failed++;
	}
	fprintf(stderr, "owner_fail: %zu of %zu cases failed as induced\n", failed,
		sizeof(cases) / sizeof(cases[0]));
	return failed >= 20 ? 0 : 1;
}
