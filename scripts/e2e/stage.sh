# shellcheck shell=bash
# Staging for the testbed runs (scripts/e2e-collect.sh, e2e-baseline.sh, e2e-sets.sh): what
# goes into the guest beside the kernel (E2E_EXTRA_DIR). Sourced from the repository root.

# stage_agent STAGE: builds probegen-agent (release) and puts it into STAGE without its debug
# info (the initramfs stays small).
stage_agent() {
	cargo build --release -p probegen-agent --bin probegen-agent >&2
	strip -o "$1/probegen-agent" target/release/probegen-agent
}

# stage_set SET DEST: compiles SET/probes.bpf.c into DEST/probes.bpf.o beside its manifest;
# the set's own probegen.bpf.h first (beside it or in its parent), else generated/'s.
stage_set() {
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
		-I"$1/.." -Igenerated -c "$1/probes.bpf.c" -o "$2/probes.bpf.o" || return 1
	cp "$1/manifest.yaml" "$2/manifest.yaml"
}
