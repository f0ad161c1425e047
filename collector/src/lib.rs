//! Runtime collector (see issue: Collector).
