//! Readers of the files the exporters write, decoded here from the formats'
//! own definitions rather than with the exporters' code; the CLI's
//! end-to-end tests read its exports with them too.
#![allow(dead_code)] // each test binary uses a part

pub mod firefox;
pub mod otlp;
pub mod perfetto;
pub mod pprof;
pub mod protobuf;
