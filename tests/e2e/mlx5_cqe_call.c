// mlx5_cqe_call: what a job's poll does when the NIC hands it an error completion, without the
// NIC: loads the given libmlx5 (dlopen, as libibverbs loads its provider) and calls the
// library's own dump_cqe at the file offset generated/providers.yaml names, with an error CQE
// built here (QPN, syndrome, vendor syndrome chosen by the caller; mlx5_dump_cqe.h).
//
//   mlx5_cqe_call LIBRARY OFFSET QPN SYNDROME VENDOR_SYNDROME
//
// MLX5_CQE_CALL_WAIT=S: hold the library mapped S seconds before the call (an agent scanning
// the host's processes finds it and attaches); MLX5_CQE_CALL_TIMES=N: N calls (a dying QP's
// error completions, one entry and a count).
#define _GNU_SOURCE
#include <time.h>
#include <unistd.h>

#include "mlx5_dump_cqe.h"

static unsigned long env_num(const char *name, unsigned long dflt)
{
	return getenv(name) ? strtoul(getenv(name), NULL, 0) : dflt;
}

int main(int argc, char **argv)
{
	unsigned long off, times;
	struct timespec t0, t1;
	void *fn;

	if (argc != 6) {
		fprintf(stderr, "usage: %s LIBRARY OFFSET QPN SYNDROME VENDOR_SYNDROME\n", argv[0]);
		return 2;
	}
	off = strtoul(argv[2], NULL, 0);
	fn = pg_dump_cqe_of(argv[1], off);
	if (!fn)
		return 1;
	sleep((unsigned)env_num("MLX5_CQE_CALL_WAIT", 0));
	times = env_num("MLX5_CQE_CALL_TIMES", 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pg_call_dump_cqe(fn, strtoul(argv[3], NULL, 0), (unsigned)strtoul(argv[4], NULL, 0),
			 (unsigned)strtoul(argv[5], NULL, 0), times);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* the whole per-call cost (benches/probe_cost.sh): a uprobe's trap and program included */
	printf("called dump_cqe at %p (file offset %#lx) %lu times ns_per_call=%.0f pid=%d\n", fn, off,
	       times, ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)times,
	       getpid());
	return 0;
}
