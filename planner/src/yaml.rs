//! yaml
