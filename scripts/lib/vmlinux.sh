# shellcheck shell=bash
# The one vmlinux extractor: the ELF vmlinux (with its BTF) out of an x86 bzImage. Sourced by
# scripts/fetch-kernel.sh (the analysis's vmlinux) and scripts/e2e/lib.sh (the testbed's PVH
# boot), so both read a kernel image the same way. Messages go through the caller's `log`.

# Unsigned little-endian integer of SIZE bytes at OFFSET of FILE: read_le FILE OFFSET SIZE.
read_le() { od -An -v -t "u$3" -j "$2" -N "$3" --endian=little "$1" | tr -d ' \n'; }

# copy_range FILE OFFSET [LENGTH]: bytes of FILE to stdout (no SIGPIPE-prone tail | head).
copy_range() {
	if [[ $# -eq 3 ]]; then
		dd if="$1" bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none
	else
		dd if="$1" bs=1M iflag=skip_bytes skip="$2" status=none
	fi
}

is_elf() { [[ $(od -An -v -t x1 -N 4 "$1" | tr -d ' \n') == 7f454c46 ]]; }

# decompress_payload FILE OUT: FILE starts with an xz, zstd or gzip stream (possibly followed
# by other bytes). Writes the decompressed data to OUT; prints the compressor name.
decompress_payload() {
	local magic
	magic=$(od -An -v -t x1 -N 6 "$1" | tr -d ' \n')
	case "${magic}" in
	fd377a585a00)
		# --single-stream ignores whatever follows the first .xz stream.
		xz -dc --single-stream <"$1" >"$2" 2>/dev/null || true
		printf xz ;;
	28b52ffd*)
		# zstd rejects trailing bytes, but the frame before them is already written out.
		zstd -dcq <"$1" >"$2" 2>/dev/null || true
		printf zstd ;;
	1f8b*)
		# gzip warns about trailing bytes (exit 2) after writing the stream out.
		gzip -dc <"$1" >"$2" 2>/dev/null || true
		printf gzip ;;
	*) return 1 ;;
	esac
}

# extract_vmlinux BZIMAGE OUT WORKDIR: the ELF vmlinux of BZIMAGE into OUT. Returns 1 (with a
# line through `log`) when no payload decompresses to an ELF file of the size the image says.
extract_vmlinux() {
	local bz=$1 out=$2 work=$3 kind="" setup_sects proto start len expect offset got
	local payload="${work}/payload"
	# Boot protocol >= 2.08 records the compressed payload's place in the setup header;
	# its last 4 bytes are the le32 decompressed size (mkpiggy), dropped before decompressing.
	if [[ $(od -An -v -c -j 514 -N 4 "${bz}" | tr -d ' \n') == HdrS ]]; then
		setup_sects=$(read_le "${bz}" 497 1)
		[[ ${setup_sects} -eq 0 ]] && setup_sects=4
		proto=$(read_le "${bz}" 518 2)
		if [[ ${proto} -ge 520 ]]; then # 0x208
			start=$(((setup_sects + 1) * 512 + $(read_le "${bz}" 584 4)))
			len=$(read_le "${bz}" 588 4)
			if [[ ${len} -gt 4 ]]; then
				copy_range "${bz}" "${start}" "$((len - 4))" >"${payload}"
				expect=$(read_le "${bz}" "$((start + len - 4))" 4)
				if kind=$(decompress_payload "${payload}" "${out}") && is_elf "${out}"; then
					rm -f "${payload}"
					got=$(stat -c %s "${out}")
					if [[ ${got} -ne ${expect} ]]; then
						log "vmlinux from ${bz}: ${got} bytes, size trailer says ${expect}"
						return 1
					fi
					log "vmlinux: ${kind} payload at offset ${start} (${len} bytes, setup header)"
					return 0
				fi
			fi
		fi
	fi
	# Fallback: scan for the xz / zstd magic bytes and try each hit. (Only the offsets are
	# passed on: bash's `read` in a UTF-8 locale swallows the newline after a stray 0xfd.)
	log "setup header did not give a usable payload; scanning ${bz} for xz/zstd magic"
	while read -r offset; do
		copy_range "${bz}" "${offset}" >"${payload}"
		if kind=$(decompress_payload "${payload}" "${out}") && [[ -s ${out} ]] && is_elf "${out}"; then
			rm -f "${payload}"
			log "vmlinux: ${kind} payload at offset ${offset} (magic scan)"
			return 0
		fi
	done < <(LC_ALL=C grep -obUaP '\xfd7zXZ\x00|\x28\xb5\x2f\xfd' "${bz}" | LC_ALL=C cut -d: -f1 || true)
	rm -f "${payload}"
	log "no xz, zstd or gzip payload that decompresses to an ELF vmlinux found in ${bz}"
	return 1
}
