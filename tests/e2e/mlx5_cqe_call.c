// mlx5_cqe_call: what a job's poll does when the NIC hands it an error completion, without the
// NIC: loads the given libmlx5 (dlopen, as libibverbs loads its provider) and calls the
// library's own dump_cqe at the file offset generated/providers.yaml names, with an error CQE
// built here (QPN, syndrome, vendor syndrome, opcode chosen by the caller) and a zeroed
// context (no debug file: dump_cqe prints nothing).
//
//   mlx5_cqe_call LIBRARY OFFSET QPN SYNDROME VENDOR_SYNDROME
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct want {
	const char *path;
	unsigned long off;
	void *addr;
};

/* the address the loader mapped file offset `off` of the library at */
static int find(struct dl_phdr_info *info, size_t size, void *data)
{
	struct want *w = data;
	int i;

	(void)size;
	if (!info->dlpi_name || strcmp(info->dlpi_name, w->path))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_LOAD && w->off >= p->p_offset &&
		    w->off < p->p_offset + p->p_filesz)
			w->addr = (void *)(info->dlpi_addr + p->p_vaddr + (w->off - p->p_offset));
	}
	return 1;
}

int main(int argc, char **argv)
{
	unsigned char cqe[64] = { 0 };
	struct want w;
	unsigned long qpn;
	void (*dump_cqe)(void *mctx, void *cqe);
	void *mctx;

	if (argc != 6) {
		fprintf(stderr, "usage: %s LIBRARY OFFSET QPN SYNDROME VENDOR_SYNDROME\n", argv[0]);
		return 2;
	}
	if (!dlopen(argv[1], RTLD_NOW)) {
		fprintf(stderr, "mlx5_cqe_call: %s\n", dlerror());
		return 1;
	}
	w.path = argv[1];
	w.off = strtoul(argv[2], NULL, 0);
	w.addr = NULL;
	dl_iterate_phdr(find, &w);
	if (!w.addr) {
		fprintf(stderr, "mlx5_cqe_call: offset %#lx is in no loaded segment of %s\n", w.off,
			argv[1]);
		return 1;
	}
	qpn = strtoul(argv[3], NULL, 0);
	cqe[0x36] = (unsigned char)strtoul(argv[5], NULL, 0);
	cqe[0x37] = (unsigned char)strtoul(argv[4], NULL, 0);
	cqe[0x39] = (qpn >> 16) & 0xff;
	cqe[0x3a] = (qpn >> 8) & 0xff;
	cqe[0x3b] = qpn & 0xff;
	cqe[0x3f] = 0xd0; /* requester error */
	/* larger than any rdma-core's struct mlx5_context, zeroed: no debug file */
	mctx = calloc(1, 1 << 20);
	dump_cqe = (void (*)(void *, void *))w.addr;
	dump_cqe(mctx, cqe);
	printf("called dump_cqe at %p (file offset %#lx) pid=%d\n", w.addr, w.off, getpid());
	return 0;
}
