//! Ring-buffer sample -> [`PgRecord`]: one length check, then one unaligned read of the
//! generated `#[repr(C)]` type (every bit pattern is a valid `PgRecord`: integers and byte
//! arrays only). No per-field parsing.

use crate::record::{PgRecord, RECORD_SIZE};

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record of {0} bytes, expected {RECORD_SIZE}")]
    Size(usize),
}

/// Decodes one sample. The ring buffer hands out exactly `sizeof(struct pg_record)` bytes per
/// sample, so any other length means the object and this collector disagree on the layout.
#[inline]
pub fn decode(bytes: &[u8]) -> Result<PgRecord, DecodeError> {
    if bytes.len() != RECORD_SIZE {
        return Err(DecodeError::Size(bytes.len()));
    }
    // SAFETY: the length is exactly size_of::<PgRecord>() (asserted at compile time in
    // record.rs); PgRecord is repr(C) of integers and byte arrays, so every bit pattern is a
    // valid value; read_unaligned does not require the slice to be aligned.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<PgRecord>()) })
}

/// The record's bytes, as the kernel wrote them (for `--record` and tests).
pub fn encode(rec: &PgRecord) -> [u8; RECORD_SIZE] {
    // SAFETY: PgRecord is repr(C) without padding (record.rs and codegen's test), so all
    // RECORD_SIZE bytes are initialised.
    unsafe { std::mem::transmute::<PgRecord, [u8; RECORD_SIZE]>(*rec) }
}

/// `comm` up to its first NUL, lossily as UTF-8.
pub fn comm_str(comm: &[u8; 16]) -> std::borrow::Cow<'_, str> {
    let n = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..n])
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// Bytes of a hex string; `None` on odd length or a non-hex digit.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    fn d(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    b.chunks_exact(2)
        .map(|p| Some(d(p[0])? << 4 | d(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the kernel lays it out, written byte by byte (little-endian x86-64).
    fn kernel_bytes() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&7u64.to_le_bytes()); // seq
        b.extend_from_slice(&123_456_789u64.to_le_bytes()); // ts_ns
        b.extend_from_slice(&25u32.to_le_bytes()); // probe_id
        b.extend_from_slice(&14i32.to_le_bytes()); // err
        b.extend_from_slice(&288u32.to_le_bytes()); // pid
        b.extend_from_slice(&289u32.to_le_bytes()); // tid
        b.extend_from_slice(&0x1234u64.to_le_bytes()); // cgroup_id
        b.extend_from_slice(&1u32.to_le_bytes()); // cpu
        b.extend_from_slice(&2u32.to_le_bytes()); // nargs
        for a in [0xff28_0000_0000_1000u64, 0x7fcd_42c1_e000, 0, 0] {
            b.extend_from_slice(&a.to_le_bytes());
        }
        let mut comm = [0u8; 16];
        comm[..10].copy_from_slice(b"verbs_fail");
        b.extend_from_slice(&comm);
        b
    }

    #[test]
    fn decodes_kernel_layout() {
        let b = kernel_bytes();
        assert_eq!(b.len(), RECORD_SIZE);
        let r = decode(&b).expect("decode");
        assert_eq!(r.seq, 7);
        assert_eq!(r.ts_ns, 123_456_789);
        assert_eq!(r.probe_id, 25);
        assert_eq!(r.err, 14);
        assert_eq!((r.pid, r.tid), (288, 289));
        assert_eq!(r.cgroup_id, 0x1234);
        assert_eq!(r.cpu, 1);
        assert_eq!(r.nargs, 2);
        assert_eq!(r.args[1], 0x7fcd_42c1_e000);
        assert_eq!(comm_str(&r.comm), "verbs_fail");
        assert_eq!(encode(&r).to_vec(), b);
    }

    #[test]
    fn unaligned_and_wrong_sizes() {
        let mut b = vec![0u8];
        b.extend(kernel_bytes());
        assert_eq!(decode(&b[1..]).map(|r| r.pid), Ok(288));
        assert_eq!(decode(&b), Err(DecodeError::Size(97)));
        assert_eq!(decode(&b[..10]), Err(DecodeError::Size(10)));
        assert_eq!(decode(&[]), Err(DecodeError::Size(0)));
    }

    #[test]
    fn hex_roundtrip() {
        let b = kernel_bytes();
        assert_eq!(unhex(&hex(&b)), Some(b));
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("ABff"), Some(vec![0xab, 0xff]));
    }

    #[test]
    fn comm_without_nul() {
        assert_eq!(comm_str(&[b'a'; 16]), "a".repeat(16));
    }
}
