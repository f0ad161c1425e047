// provider_uprobe: loads providers/bpf/mlx5_cqe.bpf.o (or another object's one program: the
// empty twin of benches/probe_cost.sh) and attaches its uprobe at each
// LIBRARY:OFFSET given (the file offsets of generated/providers.yaml), then prints every
// error CQE the program records until SIGTERM, and the program's counters.
//
//   provider_uprobe OBJECT LIBRARY:OFFSET...
//
// Prints `attached LIBRARY OFFSET` or `FAILED LIBRARY OFFSET: <error>` per target, `ready N`,
// then `cqe tgid=.. qpn=0x.. syndrome=0x.. vendor_syndrome=0x.. opcode=0x..` per record and
// at the end `counts seen=N dropped=N received=N`. Exits 1 when nothing attached.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct pg_provider_cqe {
	unsigned int tgid, qpn;
	unsigned char syndrome, vendor_syndrome, opcode, pad;
	unsigned int pad2;
	unsigned long long ts_ns, cgroup_id;
	char comm[16];
};

static volatile sig_atomic_t stop;
static long received;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int on_record(void *ctx, void *data, size_t len)
{
	const struct pg_provider_cqe *r = data;

	(void)ctx;
	if (len < sizeof(*r))
		return 0;
	received++;
	printf("cqe tgid=%u qpn=0x%x syndrome=0x%x vendor_syndrome=0x%x opcode=0x%x\n", r->tgid,
	       r->qpn, r->syndrome, r->vendor_syndrome, r->opcode);
	fflush(stdout);
	return 0;
}

static unsigned long long sum(int fd, unsigned int key)
{
	int n = libbpf_num_possible_cpus(), i;
	unsigned long long *v = calloc(n > 0 ? n : 1, sizeof(*v)), s = 0;

	if (v && bpf_map_lookup_elem(fd, &key, v) == 0)
		for (i = 0; i < n; i++)
			s += v[i];
	free(v);
	return s;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct ring_buffer *rb;
	int i, attached = 0, counts;

	if (argc < 3) {
		fprintf(stderr, "usage: %s OBJECT LIBRARY:OFFSET...\n", argv[0]);
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "provider_uprobe: cannot load %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "pg_mlx5_dump_cqe");
	/* another object's one program (benches/probe_cost.sh: the empty uprobe twin) */
	if (!prog)
		prog = bpf_object__next_program(obj, NULL);
	for (i = 2; i < argc; i++) {
		char *colon = strrchr(argv[i], ':');
		size_t off;
		struct bpf_link *link;

		if (!colon || !prog) {
			fprintf(stderr, "provider_uprobe: %s: expected LIBRARY:OFFSET\n", argv[i]);
			return 2;
		}
		*colon = 0;
		off = strtoull(colon + 1, NULL, 0);
		link = bpf_program__attach_uprobe(prog, false, -1, argv[i], off);
		if (!link) {
			printf("FAILED %s %#zx: %s\n", argv[i], off, strerror(errno));
			continue;
		}
		printf("attached %s %#zx\n", argv[i], off);
		attached++;
	}
	rb = ring_buffer__new(bpf_object__find_map_fd_by_name(obj, "provider_cqes"), on_record,
			      NULL, NULL);
	counts = bpf_object__find_map_fd_by_name(obj, "provider_counts");
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("ready %d\n", attached);
	fflush(stdout);
	while (!stop) {
		/* an object without the ring (the empty twin) only stays attached */
		if (rb)
			ring_buffer__poll(rb, 100);
		else
			usleep(100000);
	}
	if (rb)
		ring_buffer__consume(rb);
	printf("counts seen=%llu dropped=%llu received=%ld\n", sum(counts, 0), sum(counts, 1),
	       received);
	return attached ? 0 : 1;
}
