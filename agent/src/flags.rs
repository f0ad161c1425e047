//! Flag values the collector's options are parsed from: durations and the metrics address.

use std::net::SocketAddr;

/// Longest duration accepted: 100 years. Longer ones are certainly typos, and every
/// `Instant + duration` the collector computes stays far from overflowing.
pub(crate) const MAX_DURATION_SECS: f64 = 100.0 * 365.25 * 86_400.0;

/// A flag value that does not parse (clap and the config file show it as the value's line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("`{0}` is not a duration (5s, 250ms, 2m, 1h)")]
    NotADuration(String),
    #[error("`{0}` is not a duration")]
    NegativeDuration(String),
    #[error("`{0}` is longer than 100 years: expected a duration such as 5s, 250ms, 2m, 1h")]
    TooLong(String),
    #[error("`{value}`: {reason}")]
    Duration { value: String, reason: String },
    #[error("--metrics `{0}`: expected 127.0.0.1:PORT or PORT")]
    Listen(String),
    #[error("`{0}`: expected MAJOR.MINOR (e.g. 18.16, 26.9)")]
    ServerVersion(String),
}

/// Parses `5s`, `250ms`, `2m`, `1h`, or plain seconds (`5`, `0.5`), at most 100 years.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, FlagError> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| FlagError::NotADuration(s.to_string()))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(FlagError::NegativeDuration(s.to_string()));
    }
    let secs = v * mult;
    if secs > MAX_DURATION_SECS {
        return Err(FlagError::TooLong(s.to_string()));
    }
    std::time::Duration::try_from_secs_f64(secs).map_err(|e| FlagError::Duration {
        value: s.to_string(),
        reason: e.to_string(),
    })
}

/// `PORT` alone or `:PORT` binds 127.0.0.1; `ADDR:PORT` binds that address.
pub fn parse_listen(s: &str) -> Result<SocketAddr, FlagError> {
    let t = s.strip_prefix(':').unwrap_or(s);
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse::<SocketAddr>()
        .map_err(|_| FlagError::Listen(s.to_string()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn huge_durations_are_errors_not_panics() {
        for s in ["1e20s", "1e20", "1e300h", "1e18ms", "4000000000s"] {
            let e = parse_duration(s).expect_err(s);
            assert!(e.to_string().contains("longer than 100 years"), "{s}: {e}");
        }
        assert!(parse_duration("36500d").is_err());
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(
            parse_listen("9464").map(|a| a.to_string()),
            Ok("127.0.0.1:9464".into())
        );
        assert_eq!(parse_listen(":9").map(|a| a.ip().is_loopback()), Ok(true));
        assert_eq!(parse_listen("0.0.0.0:1").map(|a| a.port()), Ok(1));
        assert!(parse_listen("nope").is_err());
    }
}
