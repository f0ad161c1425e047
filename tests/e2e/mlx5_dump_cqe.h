// What a job's poll does when the NIC hands it an error completion, without the NIC: the
// loaded libmlx5's own dump_cqe (found at the file offset generated/providers.yaml names)
// called with an error CQE built here and a zeroed context (no debug file: it prints
// nothing). Shared by tests/e2e/mlx5_cqe_call.c and tests/e2e/verbs_dataplane.c (its
// `provider` mode, a QP with a peer).
#ifndef PG_MLX5_DUMP_CQE_H
#define PG_MLX5_DUMP_CQE_H

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pg_want {
	const char *path;
	unsigned long off;
	void *addr;
};

/* the address the loader mapped file offset `off` of the library at */
static int pg_find(struct dl_phdr_info *info, size_t size, void *data)
{
	struct pg_want *w = data;
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

/* dlopen `lib` (as libibverbs loads its provider): dump_cqe at file offset `off`, or NULL */
static void *pg_dump_cqe_of(const char *lib, unsigned long off)
{
	struct pg_want w = { lib, off, NULL };

	if (!dlopen(lib, RTLD_NOW)) {
		fprintf(stderr, "mlx5_dump_cqe: %s\n", dlerror());
		return NULL;
	}
	dl_iterate_phdr(pg_find, &w);
	if (!w.addr)
		fprintf(stderr, "mlx5_dump_cqe: offset %#lx is in no loaded segment of %s\n", off, lib);
	return w.addr;
}

/* `times` calls of dump_cqe with a requester error CQE of QP `qpn` */
static void pg_call_dump_cqe(void *fn, unsigned long qpn, unsigned syndrome, unsigned vendor,
			     unsigned long times)
{
	unsigned char cqe[64] = { 0 };
	void (*dump_cqe)(void *mctx, void *cqe) = (void (*)(void *, void *))fn;
	/* larger than any rdma-core's struct mlx5_context, zeroed: no debug file */
	void *mctx = calloc(1, 1 << 20);
	unsigned long i;

	cqe[0x36] = (unsigned char)vendor;
	cqe[0x37] = (unsigned char)syndrome;
	cqe[0x39] = (qpn >> 16) & 0xff;
	cqe[0x3a] = (qpn >> 8) & 0xff;
	cqe[0x3b] = qpn & 0xff;
	cqe[0x3f] = 0xd0; /* requester error */
	for (i = 0; i < times; i++)
		dump_cqe(mctx, cqe);
	free(mctx);
}

#endif
