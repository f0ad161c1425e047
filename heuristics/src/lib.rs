//! heuristics
