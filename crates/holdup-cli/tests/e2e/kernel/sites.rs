//! Blocked rows name the application's site, and lock waits tell a mutex
//! held by another thread from a wait for a signal: on workloads whose
//! answer is known by construction or measured by the workload, on the
//! real kernel. Needs root and BPF.

use crate::support::*;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compile `workloads/<name>.cpp` as a C++ library is usually built: -O2,
/// no frame pointers (the unwinder must use CFI), debug info.
fn cpp_workload(name: &str) -> PathBuf {
    let src = repo_root().join("workloads").join(format!("{name}.cpp"));
    let out_dir = repo_root().join("target/workloads");
    std::fs::create_dir_all(&out_dir).unwrap();
    let bin = out_dir.join(name);
    let status = Command::new("c++")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .bounded_status();
    assert!(status.success(), "compiling {}", src.display());
    bin
}

/// `key value…` lines the workload printed, by key.
fn measured(stdout: &str, key: &str) -> Vec<Vec<f64>> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .map(|rest| rest.split(' ').map(|v| v.parse().unwrap()).collect())
        .collect()
}

fn text_report(data: &Path) -> String {
    String::from_utf8(run_ok(&["report", "-i", data.to_str().unwrap()]).stdout).unwrap()
}

/// The text section of one thread: its header, summary, advice and rows.
fn section(text: &str, tid: u64) -> String {
    let head = format!(" tid {tid}: ");
    let mut lines = text.lines().skip_while(|l| !l.contains(&head));
    let mut out: Vec<&str> = lines.next().into_iter().collect();
    out.extend(lines.take_while(|l| !(l.starts_with("# ") && l.contains(" tid "))));
    assert!(!out.is_empty(), "no section for tid {tid} in\n{text}");
    out.join("\n")
}

/// Threads that ran a function anywhere on their stacks.
fn threads_with<'a>(r: &'a Value, func: &str) -> Vec<&'a Value> {
    threads(r)
        .iter()
        .filter(|t| {
            t["functions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["symbol"].as_str().unwrap().contains(func))
        })
        .collect()
}

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

fn total(t: &Value) -> f64 {
    ["cpu", "io", "lock", "sched", "other"]
        .iter()
        .map(|c| n(&t["samples"][*c]))
        .sum()
}

fn secs(r: &Value, samples: f64) -> f64 {
    samples * n(&r["period_ns"]) / 1e9
}

/// The heaviest blocked site of a class.
fn top_site<'a>(t: &'a Value, class: &str) -> &'a Value {
    t["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["class"] == class)
        .unwrap_or_else(|| panic!("no {class} site in thread {}", t["tid"]))
}

/// The share of a site's waker samples that name one of `tids`.
fn woken_by_share(site: &Value, tids: &[u64]) -> f64 {
    let wakers = site["wakers"].as_array().unwrap();
    let by: f64 = wakers
        .iter()
        .filter(|w| {
            let name = w["name"].as_str().unwrap();
            let tid = name.rsplit(':').next().unwrap().parse::<u64>().ok();
            tid.is_some_and(|t| tids.contains(&t))
        })
        .map(|w| n(&w["samples"]))
        .sum();
    by / n(&site["samples"])
}

#[test]
#[ignore = "needs root and BPF"]
fn a_mutex_inside_a_cpp_library_is_reported_at_the_application_site() {
    let _serial = serial();
    let dir = scratch("lru_mutex");
    let bin = cpp_workload("lru_mutex");
    let (data, stdout) = record_with_output(&dir, &[], &[bin.to_str().unwrap(), "4", "60"]);
    let locked: HashMap<u64, f64> = measured(&stdout, "locked")
        .into_iter()
        .map(|v| (v[0] as u64, v[1]))
        .collect();
    assert_eq!(locked.len(), 4, "the workload reports 4 threads: {stdout}");
    let r = report(&data);
    let clients = threads_with(&r, "client");
    assert_eq!(clients.len(), 4);
    let client_tids: Vec<u64> = clients.iter().map(|t| t["tid"].as_u64().unwrap()).collect();
    for t in &clients {
        let tid = t["tid"].as_u64().unwrap();
        // The top [L] row is the C++ site, not libc or the kernel.
        let site = top_site(t, "lock");
        let label = site["site"].as_str().unwrap();
        assert_eq!(
            label, "cache::LruCache::Release(int) → cache::Mutex::Lock() → pthread_mutex_lock",
            "thread {tid}"
        );
        assert_eq!(site["dso"], "lru_mutex");
        assert_eq!(site["lock_kind"], "mutex");
        // Every wait is for the lock, and the holders are the other clients.
        let lock = n(&t["samples"]["lock"]);
        assert!(
            n(&t["lock_split"]["mutex"]) >= 0.97 * lock,
            "{}",
            t["lock_split"]
        );
        let others: Vec<u64> = client_tids.iter().copied().filter(|&c| c != tid).collect();
        let held = woken_by_share(site, &others);
        assert!(held >= 0.9, "holders named: {held:.2} of {site}");
        // Ground truth: the wall time the thread measured in Mutex::Lock is
        // the site's lock wait plus the runqueue wait after each handoff.
        let at_site =
            site_samples(t, "Mutex::Lock", "lock") + site_samples(t, "Mutex::Lock", "sched");
        let truth = locked[&tid];
        assert_near(
            &format!("seconds in Mutex::Lock, thread {tid}"),
            secs(&r, at_site),
            truth,
            0.03 + 0.05 * truth,
        );
        // By construction each thread burns 60 × 2.5 ms of CPU.
        assert_near(
            "cpu seconds",
            secs(&r, n(&t["samples"]["cpu"])),
            0.150,
            0.03,
        );
        // self keeps its meaning: the innermost user frame, inside libc.
        let in_app_self: f64 = t["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["dso"] == "lru_mutex")
            .map(|f| n(&f["self"]["lock"]))
            .sum();
        assert!(
            in_app_self <= 0.05 * lock,
            "self lock in the app: {in_app_self}"
        );
    }
    // The text report's first [L] row and the waitgraph's stacks name it too.
    let text = text_report(&data);
    let first_client = section(&text, client_tids[0]);
    let first_lock_row = first_client.lines().find(|l| l.contains("[L]")).unwrap();
    assert!(
        first_lock_row
            .contains("cache::LruCache::Release(int) → cache::Mutex::Lock() → pthread_mutex_lock"),
        "{first_client}"
    );
    assert!(
        first_client.contains("held by: lru_mutex:"),
        "{first_client}"
    );
    let g = json(&["waitgraph", "--json", "-i", data.to_str().unwrap()]);
    let sites: Vec<&str> = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["stack_details"].as_array().unwrap())
        .filter_map(|s| s["site"].as_str())
        .collect();
    assert!(
        sites
            .iter()
            .any(|s| s.contains("cache::Mutex::Lock() → pthread_mutex_lock")),
        "{sites:?}"
    );
    let wg_text =
        String::from_utf8(run_ok(&["waitgraph", "-i", data.to_str().unwrap()]).stdout).unwrap();
    assert!(
        wg_text.contains(
            "blocked in  cache::LruCache::Release(int) → cache::Mutex::Lock() → pthread_mutex_lock"
        ),
        "{wg_text}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn parked_workers_a_joiner_and_a_timer_are_idle_not_contending() {
    let _serial = serial();
    let dir = scratch("idle_pool");
    let bin = workload("idle_pool");
    let (data, stdout) = record_with_output(&dir, &[], &[bin.to_str().unwrap(), "3", "0.5"]);
    let parked = measured(&stdout, "parked");
    let timer = measured(&stdout, "timer")[0][0];
    let join = measured(&stdout, "join")[0][0];
    assert_eq!(parked.len(), 3, "{stdout}");
    let r = report(&data);
    let text = text_report(&data);
    // (thread, its site, the seconds it measured waiting there)
    let mut idle: Vec<(&Value, &str, f64)> = Vec::new();
    let pool = threads_with(&r, "pool_worker");
    assert_eq!(pool.len(), 3);
    for (t, p) in pool.iter().zip(&parked) {
        idle.push((t, "pool_worker → pthread_cond_wait", p[0]));
    }
    let timers = threads_with(&r, "timer_thread");
    assert_eq!(timers.len(), 1);
    idle.push((timers[0], "timer_thread → pthread_cond_timedwait", timer));
    let joiner = threads_with(&r, "wait_for_job");
    assert_eq!(joiner.len(), 1);
    idle.push((joiner[0], "wait_for_job → pthread_clockjoin", join));
    for (t, site, truth) in idle {
        let tid = t["tid"].as_u64().unwrap();
        // Ground truth: the wall time the thread measured in its wait call
        // is the site's signal wait plus the runqueue wait after the wakeup
        // (long on a busy machine).
        let at_site = site_samples(t, site, "lock") + site_samples(t, site, "sched");
        assert_near(
            &format!("seconds in {site}, thread {tid}"),
            secs(&r, at_site),
            truth,
            0.03 + 0.05 * truth,
        );
        let lock = n(&t["samples"]["lock"]);
        assert!(
            n(&t["lock_split"]["mutex"]) <= 0.02 * lock,
            "{site}: {}",
            t["lock_split"]
        );
        assert!(
            secs(&r, lock) >= 0.5 * truth,
            "{site}: mostly [L], {lock} samples"
        );
        // The bperf subclass is kept: the waits are still [L].
        assert_eq!(
            t["samples"]["lock"],
            n(&t["lock_split"]["signal"]) + n(&t["lock_split"]["mutex"])
        );
        let top = top_site(t, "lock");
        assert!(top["site"].as_str().unwrap().contains(site), "{top}");
        assert_eq!(top["lock_kind"], "signal");
        let s = section(&text, tid);
        assert!(
            !s.contains("critical section"),
            "lock advice for an idle thread:\n{s}"
        );
        assert!(
            s.contains("# advice: ") && s.contains("waiting for a signal"),
            "{s}"
        );
    }
    // The job thread burns 0.5 s and gets no lock advice either.
    let job = threads(&r)
        .iter()
        .find(|t| {
            t["functions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["symbol"] == "job")
        })
        .expect("the job thread");
    assert_near(
        "job cpu seconds",
        secs(&r, n(&job["samples"]["cpu"])),
        0.5,
        0.05,
    );
    assert!(!section(&text, job["tid"].as_u64().unwrap()).contains("critical section"));
}

#[test]
#[ignore = "needs root and BPF"]
fn a_mutex_fight_is_mutex_time_with_the_holders_named() {
    let _serial = serial();
    let dir = scratch("mutex_fight_split");
    let bin = workload("mutex_fight");
    let (data, _) = record_with_output(&dir, &[], &[bin.to_str().unwrap(), "4", "60"]);
    let r = report(&data);
    let text = text_report(&data);
    let workers = threads_with(&r, "critical_section");
    assert_eq!(workers.len(), 4);
    let tids: Vec<u64> = workers.iter().map(|t| t["tid"].as_u64().unwrap()).collect();
    let (mut mutex, mut all) = (0.0, 0.0);
    for t in &workers {
        let tid = t["tid"].as_u64().unwrap();
        let lock = n(&t["samples"]["lock"]);
        assert!(
            n(&t["lock_split"]["mutex"]) >= 0.97 * lock,
            "{}",
            t["lock_split"]
        );
        let site = top_site(t, "lock");
        assert!(
            site["site"]
                .as_str()
                .unwrap()
                .ends_with("worker → pthread_mutex_lock"),
            "{site}"
        );
        assert_eq!(site["lock_kind"], "mutex");
        let others: Vec<u64> = tids.iter().copied().filter(|&x| x != tid).collect();
        let held = woken_by_share(site, &others);
        assert!(held >= 0.9, "holders named: {held:.2} of {site}");
        let s = section(&text, tid);
        assert!(
            s.contains("waiting for mutexes held by other threads"),
            "{s}"
        );
        mutex += n(&t["lock_split"]["mutex"]);
        all += total(t);
    }
    // Serialized on one lock: while one of four holds it, the others wait.
    assert!(mutex / all >= 0.5, "pooled mutex share {:.2}", mutex / all);
    // The main thread joins them: a signal, not contention.
    let main = threads(&r)
        .iter()
        .find(|t| t["tid"] == t["pid"])
        .expect("main thread");
    assert_eq!(main["lock_split"]["mutex"], 0);
    assert!(n(&main["lock_split"]["signal"]) >= 0.9 * total(main));
    assert!(!section(&text, main["tid"].as_u64().unwrap()).contains("critical section"));
}
