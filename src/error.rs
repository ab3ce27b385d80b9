//! Typed errors.
