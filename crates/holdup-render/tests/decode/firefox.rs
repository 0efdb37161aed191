//! The Firefox Profiler's processed format, read back into samples and
//! markers per thread.

/// Per thread of a Firefox profile: (name, tid, samples as (leaf frame
/// name, leaf category name, weight, CPU delta in µs, time in ms), markers
/// as (name, category name, start, end, waker, wait, runnable)).
pub type FirefoxThread = (
    String,
    u64,
    Vec<(String, String, i64, i64, f64)>,
    Vec<FirefoxMarker>,
);
pub type FirefoxMarker = (String, String, f64, f64, String, f64, f64);

pub fn firefox_threads(doc: &serde_json::Value) -> Vec<FirefoxThread> {
    let categories: Vec<&str> = doc["meta"]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let u = |v: &serde_json::Value| v.as_u64().unwrap() as usize;
    let arr = |v: &serde_json::Value| v.as_array().unwrap().clone();
    doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let strings = arr(&t["stringArray"]);
            let string = |i: usize| strings[i].as_str().unwrap().to_string();
            let s = &t["samples"];
            let mut time = 0.0;
            let samples = (0..u(&s["length"]))
                .map(|i| {
                    time += s["timeDeltas"][i].as_f64().unwrap();
                    let frame = u(&t["stackTable"]["frame"][u(&s["stack"][i])]);
                    let func = u(&t["frameTable"]["func"][frame]);
                    let category = u(&t["frameTable"]["category"][frame]);
                    (
                        string(u(&t["funcTable"]["name"][func])),
                        categories[category].to_string(),
                        s["weight"][i].as_i64().unwrap(),
                        s["threadCPUDelta"][i].as_i64().unwrap(),
                        time,
                    )
                })
                .collect();
            let m = &t["markers"];
            let markers = (0..u(&m["length"]))
                .map(|i| {
                    let data = &m["data"][i];
                    (
                        string(u(&m["name"][i])),
                        categories[u(&m["category"][i])].to_string(),
                        m["startTime"][i].as_f64().unwrap(),
                        m["endTime"][i].as_f64().unwrap(),
                        string(u(&data["waker"])),
                        data["wait"].as_f64().unwrap(),
                        data["runnable"].as_f64().unwrap(),
                    )
                })
                .collect();
            (
                t["name"].as_str().unwrap().to_string(),
                // The format has tids as strings or numbers.
                t["tid"]
                    .as_u64()
                    .or_else(|| t["tid"].as_str()?.parse().ok())
                    .unwrap(),
                samples,
                markers,
            )
        })
        .collect()
}
