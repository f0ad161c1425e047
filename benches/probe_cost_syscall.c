// probe_cost_syscall: the per-call cost of a probe mechanism (benches/probe_cost.sh, in the qemu
// guest): N x getpgid(0), whose kernel entry __x64_sys_getpgid carries an empty fexit program,
// an empty kretprobe, or nothing; the difference of the ns per call is the mechanism's.
//
//   probe_cost_syscall N
//
// Prints `PC getpgid n=<N> ns_per_call=<t>`.

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec a, b;
	char *end;
	long n, i;

	n = argc == 2 ? strtol(argv[1], &end, 10) : 0;
	if (argc != 2 || *end || n <= 0) {
		fprintf(stderr, "usage: %s N\n", argv[0]);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++)
		syscall(SYS_getpgid, 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("PC getpgid n=%ld ns_per_call=%.1f\n", n,
	       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
