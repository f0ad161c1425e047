//! errno labels for snapshots and metrics; the names are the manifest's table
//! (`manifest::errno_name`).

pub use manifest::errno_name;

/// The name used in snapshots and metrics: the symbolic name, `none` for 0 (a failure without
/// an errno: NULL pointer, or an int below -4095), `E<n>` for an unnamed number.
pub fn errno_label(err: u32) -> std::borrow::Cow<'static, str> {
    match (err, errno_name(err)) {
        (0, _) => "none".into(),
        (_, Some(n)) => n.into(),
        (n, None) => format!("E{n}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(errno_label(22), "EINVAL");
        assert_eq!(errno_label(0), "none");
        assert_eq!(errno_label(4000), "E4000");
    }
}
