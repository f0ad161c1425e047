// SPDX-License-Identifier: GPL-2.0
/*
 * The mlx5 provider's error completion, seen where only user space sees it: a uprobe on
 * libmlx5's static dump_cqe(mctx, cqe), which the inlined error branch of every poll variant
 * calls for an error CQE (not a flush, a retry exceeded or an ODP fault). It is attached at
 * the file offset `probegen providers resolve` found for the library's build-id
 * (generated/providers.yaml), never by a symbol: Debian's libmlx5 has none.
 *
 * The 64-byte error CQE (mlx5dv.h struct mlx5_err_cqe): vendor syndrome at 0x36, syndrome at
 * 0x37, the QP number in the low 24 bits of the big-endian word at 0x38, op_own at 0x3f
 * (its high nibble: 0xD requester error, 0xE responder error).
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct pg_provider_cqe {
	__u32 tgid;
	__u32 qpn;
	__u8 syndrome;
	__u8 vendor_syndrome;
	__u8 opcode; /* op_own >> 4 */
	__u8 pad;
	__u32 pad2;
	__u64 ts_ns;
	__u64 cgroup_id; /* the job's cgroup, kept when the process is gone before it is read */
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} provider_cqes SEC(".maps");

/* [0] error CQEs seen, [1] of them dropped (ring full): seen == received + dropped */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} provider_counts SEC(".maps");

static __always_inline void count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&provider_counts, &k);

	if (v)
		*v += 1;
}

/* BPF_KPROBE: the argument registers, the same for a uprobe (libbpf 1.1 has no BPF_UPROBE) */
SEC("uprobe")
int BPF_KPROBE(pg_mlx5_dump_cqe, void *mctx, const __u8 *cqe)
{
	struct pg_provider_cqe *r;
	__u8 tail[10]; /* bytes 0x36..0x3f */

	count(0);
	r = bpf_ringbuf_reserve(&provider_cqes, sizeof(*r), 0);
	if (!r) {
		count(1);
		return 0;
	}
	if (bpf_probe_read_user(tail, sizeof(tail), cqe + 0x36)) {
		__builtin_memset(tail, 0, sizeof(tail));
	}
	r->tgid = bpf_get_current_pid_tgid() >> 32;
	r->vendor_syndrome = tail[0];
	r->syndrome = tail[1];
	r->qpn = ((__u32)tail[3] << 16) | ((__u32)tail[4] << 8) | tail[5];
	r->opcode = tail[9] >> 4;
	r->pad = 0;
	r->pad2 = 0;
	r->ts_ns = bpf_ktime_get_ns();
	r->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	bpf_ringbuf_submit(r, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
