//! [`SharedPart`]: a part of a snapshot that many snapshots hold at once, one allocation for all
//! of them (the probe list's all-zero counters of an idle window, the attach status of a run).
//! It serialises as the value it holds, and a holder can tell "the same allocation" without
//! comparing values (the snapshot line's cache does).

use std::ops::Deref;
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// A shared, immutable value; compares and serialises as `T`.
#[derive(Debug, Default)]
pub struct SharedPart<T>(Arc<T>);

/// One allocation is equal to itself without a look at the value.
impl<T: PartialEq> PartialEq for SharedPart<T> {
    fn eq(&self, other: &Self) -> bool {
        SharedPart::same(self, other) || *self.0 == *other.0
    }
}

impl<T: Eq> Eq for SharedPart<T> {}

impl<T> Clone for SharedPart<T> {
    fn clone(&self) -> Self {
        SharedPart(Arc::clone(&self.0))
    }
}

impl<T> SharedPart<T> {
    pub fn new(value: T) -> Self {
        SharedPart(Arc::new(value))
    }

    /// Whether `a` and `b` are one allocation (then they are equal; equal values may still be
    /// two allocations).
    pub fn same(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl<T> Deref for SharedPart<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for SharedPart<T> {
    fn from(value: T) -> Self {
        SharedPart::new(value)
    }
}

impl<T: Serialize> Serialize for SharedPart<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (*self.0).serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_and_compares_as_the_value() {
        let a = SharedPart::new(vec![1u32, 2]);
        let b = SharedPart::new(vec![1u32, 2]);
        assert_eq!(serde_json::to_string(&a).ok().as_deref(), Some("[1,2]"));
        assert_eq!(a, b);
        assert!(!SharedPart::same(&a, &b));
        assert!(SharedPart::same(&a, &a.clone()));
        assert_eq!(a.len(), 2);
    }
}
