// probe_cost_load: loads and attaches every program of each BPF object given, then holds the
// links until SIGINT/SIGTERM (benches/probe_cost.sh, in the qemu guest; libbpf resolves an
// fexit target in the kernel module that has it). bpftool 7.1 can load tracing programs but
// not attach them, hence this.
//
//   probe_cost_load OBJ.bpf.o...
//
// Prints per program `attached <name> <section>` or `FAILED <name> <section>: <error>` and
// then `ready`; exits 1 when nothing could be attached, else 0 after the signal.

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

#define MAX_OBJS 16
#define MAX_LINKS 64

int main(int argc, char **argv)
{
	struct bpf_object *objs[MAX_OBJS];
	struct bpf_link *links[MAX_LINKS];
	struct bpf_program *prog;
	int n = 0, attached = 0, i;

	if (argc < 2 || argc - 1 > MAX_OBJS) {
		fprintf(stderr, "usage: %s OBJ.bpf.o... (at most %d)\n", argv[0], MAX_OBJS);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	libbpf_set_print(quiet);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (i = 1; i < argc; i++) {
		struct bpf_object *obj = bpf_object__open_file(argv[i], NULL);
		int err;

		if (!obj) {
			printf("FAILED %s: open: %s\n", argv[i], strerror(errno));
			continue;
		}
		err = bpf_object__load(obj);
		if (err) {
			printf("FAILED %s: load: %s\n", argv[i], strerror(-err));
			bpf_object__close(obj);
			continue;
		}
		bpf_object__for_each_program(prog, obj) {
			struct bpf_link *link = NULL;

			if (attached < MAX_LINKS)
				link = bpf_program__attach(prog);
			else
				errno = E2BIG;
			if (!link) {
				printf("FAILED %s %s: attach: %s\n", bpf_program__name(prog),
				       bpf_program__section_name(prog), strerror(errno));
				continue;
			}
			printf("attached %s %s\n", bpf_program__name(prog),
			       bpf_program__section_name(prog));
			links[attached++] = link;
		}
		objs[n++] = obj;
	}
	printf("ready %d\n", attached);
	if (!attached)
		return 1;
	while (!stop)
		pause();
	for (i = 0; i < attached; i++)
		bpf_link__destroy(links[i]);
	for (i = 0; i < n; i++)
		bpf_object__close(objs[i]);
	return 0;
}
