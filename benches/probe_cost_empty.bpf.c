// SPDX-License-Identifier: GPL-2.0
/*
 * The baseline of benches/probe_cost.sh: an fexit program that does nothing, attached to the
 * same kernel function as a generated probe. Its bpf_stats ns/run is the floor every fexit
 * program pays (trampoline bookkeeping of the stats included); the generated probe's ns/run is
 * divided by it.
 *
 * One object per target function, built by the bench with
 *   clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
 *     -DPG_FUNC=ib_uverbs_reg_mr -DPG_NAME=empty_25 -c probe_cost_empty.bpf.c -o empty_25.bpf.o
 * PG_NAME pairs it with the generated program pg_<id> of the manifest. With -DPG_KRETPROBE it
 * is an empty kretprobe instead (the mechanism of a module without BTF), for the per-call cost
 * of each mechanism; with -DPG_FENTRY an empty fentry program, the twin of a data-plane probe
 * that runs at entry; with -DPG_UPROBE an empty uprobe (PG_FUNC unused), the twin of the
 * provider's.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef PG_FUNC
#error "build with -DPG_FUNC=<kernel function> -DPG_NAME=empty_<probe id>"
#endif

#define PG_STR2(x) #x
#define PG_STR(x) PG_STR2(x)

#ifdef PG_UPROBE
/* the twin of the mlx5 provider's uprobe (providers/bpf/mlx5_cqe.bpf.c), attached at the same
 * offset of the same library */
SEC("uprobe")
int PG_NAME(void *ctx)
{
	return 0;
}
#elif defined(PG_KRETPROBE)
SEC("kretprobe/" PG_STR(PG_FUNC))
int PG_NAME(void *ctx)
{
	return 0;
}
#elif defined(PG_FENTRY)
SEC("fentry/" PG_STR(PG_FUNC))
int PG_NAME(unsigned long long *ctx)
{
	return 0;
}
#else
SEC("fexit/" PG_STR(PG_FUNC))
int PG_NAME(unsigned long long *ctx)
{
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
