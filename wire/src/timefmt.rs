//! RFC 3339 UTC timestamps without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2025-01-31T12:00:00.123Z` (milliseconds). Written digit by digit, without `format!`:
/// every snapshot formats two of these, and an idle window does little else.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, dd) = civil_from_days(days as i64);
    let mut s = Vec::with_capacity(24);
    push_padded(&mut s, u64::try_from(y).unwrap_or(0), 4);
    for (sep, v, width) in [
        (b'-', u64::from(m), 2),
        (b'-', u64::from(dd), 2),
        (b'T', rem / 3600, 2),
        (b':', rem / 60 % 60, 2),
        (b':', rem % 60, 2),
        (b'.', u64::from(d.subsec_millis()), 3),
    ] {
        s.push(sep);
        push_padded(&mut s, v, width);
    }
    s.push(b'Z');
    // only ASCII digits and separators were written
    String::from_utf8(s).unwrap_or_default()
}

/// `v` in decimal, left-padded with zeros to `width` digits (as `{v:0width$}`).
fn push_padded(s: &mut Vec<u8>, mut v: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut n = 0;
    while v > 0 || n == 0 {
        digits[19 - n] = b'0' + (v % 10) as u8;
        v /= 10;
        n += 1;
    }
    s.resize(s.len() + width.saturating_sub(n), b'0');
    s.extend_from_slice(&digits[20 - n..]);
}

/// Nanoseconds since the epoch.
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    fn formats_as_the_format_macro_did() {
        fn by_format(t: SystemTime) -> String {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            let secs = d.as_secs();
            let (days, rem) = (secs / 86_400, secs % 86_400);
            let (y, m, dd) = civil_from_days(days as i64);
            format!(
                "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
                rem / 3600,
                rem / 60 % 60,
                rem % 60,
                d.subsec_millis()
            )
        }
        let mut ms: u64 = 0;
        // from 1970 past the year 10000, uneven steps through every field
        while ms < 260_000_000_000_000 {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(rfc3339(t), by_format(t), "{ms} ms");
            ms = ms * 3 / 2 + 7_777_777;
        }
        for i in 0..20_000u64 {
            let t = UNIX_EPOCH + Duration::from_millis(1_600_000_000_000 + i * 3_601_013);
            assert_eq!(rfc3339(t), by_format(t));
        }
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(rfc3339(before), by_format(before));
    }
}
