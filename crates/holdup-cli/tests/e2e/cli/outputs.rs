//! `-` as an output path writes to standard output, for every command that
//! writes a file.

use crate::support::outputs::*;
use crate::support::small_trace::small_trace;
use crate::support::*;

#[test]
fn dash_writes_to_standard_output() {
    let dir = scratch("outputs_stdout");
    small_trace(&dir.join("small.data"));
    for args in writers("-") {
        let o = run_in(&dir, &args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.stdout.len() > 100, "{args:?}: {} bytes", o.stdout.len());
        assert!(!dir.join("-").exists(), "{args:?}");
    }
}
