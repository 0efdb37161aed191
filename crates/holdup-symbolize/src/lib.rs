//! Addresses to frames.
