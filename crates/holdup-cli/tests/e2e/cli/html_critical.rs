//! The critical path in `holdup html`: the page carries the flame graph
//! `flame --critical-path` draws, with its wait edges as frames, and a
//! browser draws it on the page's second view.

use crate::support::*;
use holdup_trace::synth::{TraceBuilder, WAIT_FEATURES};
use holdup_trace::{Class, Waker};

/// A waiter (1) waits for a mutex its keeper (2) holds while it writes to
/// the disk: per 10 ms, the waiter waits [2, 9), the keeper runs [0, 3)
/// and waits for the disk [3, 9).
fn io_in_a_lock() -> TraceBuilder {
    let mut r = TraceBuilder::new(500.0);
    r.comm(100, 1, "waiter");
    r.comm(100, 2, "keeper");
    r.stack(1, &["pthread_mutex_lock", "take_lock", "waiter_main"]);
    r.stack(2, &["fdatasync", "sync_under_lock", "keeper_main"]);
    r.stack(3, &["fill", "keeper_main"]);
    for k in 0..50 {
        let t = 10.0 * k as f64;
        r.seg(1, t + 2.0, t + 9.0, t + 9.0, Class::Lock, Waker::Thread(2));
        r.blocked(1, (t + 2.0, t + 9.0), Class::Lock, Waker::Thread(2), 1, 7);
        r.seg(2, t + 3.0, t + 9.0, t + 9.0, Class::Io, Waker::Irq(24));
        r.blocked(2, (t + 3.0, t + 9.0), Class::Io, Waker::Irq(24), 2, 6);
        r.cpu(2, t + 2.5, 3);
    }
    r
}

/// The page of `io_in_a_lock` recorded with `features`, written in `dir`.
fn page_of(dir: &std::path::Path, features: u32) -> String {
    let r = io_in_a_lock();
    r.write(&dir.join("lock.data"), &r.header(), features)
        .unwrap();
    let o = holdup()
        .current_dir(dir)
        .args(["html", "-i", "lock.data", "-o", "lock.html"])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(dir.join("lock.html")).unwrap()
}

#[test]
fn the_page_has_the_critical_path_with_its_wait_edges() {
    let dir = scratch("html_critical");
    let page = page_of(&dir, WAIT_FEATURES);
    assert!(
        page.contains("id=\"critical-path\""),
        "no critical path view"
    );
    // The data holds the wait edge, the keeper's write under it.
    let data = page
        .split("id=\"flame-data\">")
        .nth(1)
        .and_then(|d| d.split("</script>").next())
        .unwrap();
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    let critical = data["critical"].to_string();
    let edge = "[L] wait for keeper:2";
    assert!(critical.contains(edge), "{critical}");
    assert!(critical.contains("[I] io wait"), "{critical}");

    // Opened on the critical path, a browser draws a frame for the edge.
    let url = format!("file://{}#view=critical", dir.join("lock.html").display());
    let o = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(&url)
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the script did not finish"
    );
    // Its box, in the colour of the lock subclass.
    let at = dom
        .find(&format!(">{edge}<"))
        .unwrap_or_else(|| panic!("no wait edge drawn: {dom}"));
    let box_start = dom[..at].rfind("<div class=\"").unwrap();
    let class = &dom[box_start..at];
    assert!(
        class.starts_with(&format!("<div class=\"c{}\"", Class::Lock.index())),
        "{class}"
    );
}

#[test]
fn a_page_without_wait_segments_says_why_it_has_no_critical_path() {
    let page = page_of(&scratch("html_critical_noseg"), 0);
    assert!(
        page.contains(
            "\"critical\":null,\"critical_missing\":\"the trace was recorded without wait segments"
        ),
        "{page}"
    );
}
