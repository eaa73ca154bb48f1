//! complexity
