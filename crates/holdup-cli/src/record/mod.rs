//! Recording: launching the target, draining the recorder into the trace, finishing it.

pub mod drain;
pub mod finish;
pub mod launch;
pub mod symcache;
