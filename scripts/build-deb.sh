#!/usr/bin/env bash
# Builds the Debian package of the host agent: target/debian/probegen_<version>_amd64.deb.
#
#   scripts/build-deb.sh
#
# Contents: /usr/bin/probegen-agent (stripped), the bundle of every checked-in set
# (/usr/lib/probegen/bundle, `probegen bundle`), the provider uprobe and its table
# (/usr/lib/probegen/providers), /lib/modprobe.d/probegen.conf (a `remove` rule
# per driver module of the bundle), the unit /lib/systemd/system/probegen-agent.service,
# the conffile /etc/probegen/probegen.conf, the man page, copyright, changelog, the lintian
# overrides; maintainer scripts from deploy/debian/. Built with Debian's dpkg-deb directly (no
# cargo-deb: nothing to fetch or compile, and the layout, conffiles and scripts are exactly the
# files in deploy/debian/); dependencies from dpkg-shlibdeps. Deterministic for one commit:
# SOURCE_DATE_EPOCH (default: the last commit's time) sets every mtime and the changelog date.
# Environment: PROBEGEN_DEB_VERSION (default: the workspace version; tests/package.rs builds a
# bumped one to check an upgrade), PROBEGEN_DEB_OUT (default target/debian),
# PROBEGEN_DEB_MAINTAINER (the Maintainer field and the changelog's signer).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
log() { printf '[build-deb] %s\n' "$*" >&2; }
bad() { log "$*"; exit 2; }

for tool in dpkg-deb dpkg-shlibdeps fakeroot clang strip gzip; do
	command -v "$tool" >/dev/null || bad "$tool not found (scripts/install-deps.sh installs it)"
done
VERSION=${PROBEGEN_DEB_VERSION:-$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)}
[[ $VERSION =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || bad "version '$VERSION': expected a Debian version"
OUT=${PROBEGEN_DEB_OUT:-$REPO/target/debian}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
D=deploy/debian
MAINTAINER=${PROBEGEN_DEB_MAINTAINER:-probegen maintainers <probegen@lists.probegen.org>}

log "building probegen-agent and probegen (release)"
# without SOURCE_DATE_EPOCH: cargo passes it to build scripts, and a value other than the last
# build's recompiles libbpf-sys and tree-sitter (minutes) every time builds alternate
env -u SOURCE_DATE_EPOCH cargo build --release -p probegen-agent --bin probegen-agent -p probegen --bin probegen >&2

STAGE=$OUT/stage-$VERSION
ROOT=$STAGE/root
rm -rf "$STAGE"
mkdir -p "$ROOT/DEBIAN" "$ROOT/usr/bin" "$ROOT/usr/lib/probegen" "$ROOT/lib/systemd/system" \
	"$ROOT/etc/probegen" "$ROOT/usr/share/doc/probegen" "$ROOT/usr/share/man/man8" \
	"$ROOT/usr/share/lintian/overrides"
strip --strip-unneeded --remove-section=.comment -o "$ROOT/usr/bin/probegen-agent" target/release/probegen-agent
target/release/probegen bundle --sets generated --out "$ROOT/usr/lib/probegen/bundle" >/dev/null
# `collect --provider-probes`: the mlx5 error-completion uprobe and the table of its offsets
mkdir -p "$ROOT/usr/lib/probegen/providers"
clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
	-c providers/bpf/mlx5_cqe.bpf.c -o "$ROOT/usr/lib/probegen/providers/mlx5_cqe.bpf.o"
install -m 644 generated/providers.yaml "$ROOT/usr/lib/probegen/providers/providers.yaml"
# modprobe.d: a `remove` rule per driver module of the bundle's sets, so that `modprobe -r`
# first has the running agent detach that module's probes (docs/operations.md, "Drivers that come and go")
mkdir -p "$ROOT/lib/modprobe.d"
MODS=$(tr -d ' \n' <"$ROOT/usr/lib/probegen/bundle/index.json" | grep -o '"driver_modules":\[[^]]*\]' |
	sed 's/.*\[//; s/\]//; s/"//g' | tr ',' '\n' | grep . | LC_ALL=C sort -u)
[ -n "$MODS" ] || bad "the bundle's index names no driver module"
{
	printf '# probegen: before a driver module of the probe sets unloads, the running agent detaches\n'
	printf '# its probes (a loaded probe holds the module); without a running agent the release is a\n'
	printf '# no-op. Plain rmmod bypasses these rules.\n'
	for m in $MODS; do
		printf 'remove %s /usr/bin/probegen-agent release %s; /sbin/modprobe -r --ignore-remove %s\n' "$m" "$m" "$m"
	done
} >"$ROOT/lib/modprobe.d/probegen.conf"
chmod 644 "$ROOT/lib/modprobe.d/probegen.conf"
install -m 644 $D/probegen-agent.service "$ROOT/lib/systemd/system/"
install -m 644 $D/probegen.conf "$ROOT/etc/probegen/probegen.conf"
install -m 644 $D/copyright "$ROOT/usr/share/doc/probegen/copyright"
install -m 644 $D/lintian-overrides "$ROOT/usr/share/lintian/overrides/probegen"
gzip -9n <$D/probegen-agent.8 >"$ROOT/usr/share/man/man8/probegen-agent.8.gz"
{
	printf 'probegen (%s) unstable; urgency=medium\n\n' "$VERSION"
	printf '  * The host agent, its probe set bundle and its hardened systemd unit.\n\n'
	printf ' -- %s  %s\n' "$MAINTAINER" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$ROOT/usr/share/doc/probegen/changelog.gz"
for s in postinst prerm postrm; do install -m 755 $D/$s "$ROOT/DEBIAN/$s"; done
echo /etc/probegen/probegen.conf >"$ROOT/DEBIAN/conffiles"

# Depends: from the binary's shared libraries (dpkg-shlibdeps reads a debian/control)
mkdir -p "$STAGE/debian"
printf 'Source: probegen\n\nPackage: probegen\nArchitecture: amd64\n' >"$STAGE/debian/control"
SHLIBS=$(cd "$STAGE" && dpkg-shlibdeps -O "root/usr/bin/probegen-agent" | sed -n 's/^shlibs:Depends=//p')
[ -n "$SHLIBS" ] || bad "dpkg-shlibdeps found no dependency of probegen-agent"
SIZE=$(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
cat >"$ROOT/DEBIAN/control" <<EOF
Package: probegen
Version: $VERSION
Architecture: amd64
Maintainer: $MAINTAINER
Installed-Size: $SIZE
Depends: $SHLIBS
Recommends: rdma-core
Section: admin
Priority: optional
Description: always-on eBPF probes of the kernel's RDMA control path
 probegen-agent attaches fexit probes to the kernel's RDMA verbs and vendor
 driver functions (ibv_create_qp, ibv_reg_mr, ...), picks the probe set built
 for the running kernel and the loaded RDMA driver from its bundle, and writes
 a snapshot of every failure and its call chain every interval (JSON Lines,
 ClickHouse, Prometheus). The service starts with rdma-hw.target as a dynamic
 user with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN only.
EOF
(cd "$ROOT" && find . -type f ! -path './DEBIAN/*' -printf '%P\n' | LC_ALL=C sort |
	xargs md5sum >DEBIAN/md5sums)
find "$ROOT" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
DEB=$OUT/probegen_${VERSION}_amd64.deb
fakeroot dpkg-deb --root-owner-group -Zxz --build "$ROOT" "$DEB" >&2
rm -rf "$STAGE"
log "$DEB ($(du -k "$DEB" | cut -f1) KiB)"
echo "$DEB"
