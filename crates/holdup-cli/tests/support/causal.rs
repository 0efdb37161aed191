//! Helpers shared by the `causal` end-to-end tests with and without root.

use serde_json::Value;
use std::sync::MutexGuard;

/// The tests time programs: running two at once on two cores would spoil
/// both, so they take turns, with every other timed test of the binary.
pub fn turn() -> MutexGuard<'static, ()> {
    crate::support::serial()
}

pub fn target<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["target"] == name)
        .unwrap_or_else(|| panic!("no target {name} in {report}"))
}

/// The fitted curve at speedup `s`, interpolated (what `report` shows).
pub fn predict(t: &Value, s: f64) -> f64 {
    let pts: Vec<(f64, f64)> = t["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["speedup"].as_f64().unwrap(),
                p["fitted"].as_f64().unwrap(),
            )
        })
        .collect();
    if s <= pts[0].0 {
        return pts[0].1;
    }
    for w in pts.windows(2) {
        if s <= w[1].0 {
            let f = (s - w[0].0) / (w[1].0 - w[0].0);
            return w[0].1 + f * (w[1].1 - w[0].1);
        }
    }
    pts.last().unwrap().1
}
