//! The static call graph DARC's descent follows, on a fixture built with
//! each way x86-64 code calls a shared library.
mod common;

use holdup_symbolize::callgraph::{callees, Follow};
use std::path::Path;

/// The callees of `root` in the fixture built with `flags`, as
/// (file name, symbol).
fn callees_of(name: &str, flags: &[&str], follow: Follow) -> Vec<(String, String)> {
    let exe = common::build("calls.c", name, flags);
    let edges = callees(&exe, "root", 1, follow).expect("call graph");
    edges
        .into_iter()
        .map(|(caller, callee)| {
            assert_eq!(caller.symbol, "root");
            let file = callee.binary.file_name().unwrap().to_string_lossy();
            let file = if callee.binary == exe {
                "exe".into()
            } else {
                file.into_owned()
            };
            (file, callee.symbol)
        })
        .collect()
}

#[test]
fn direct_plt_and_got_calls_are_followed_and_pointer_calls_are_not() {
    for (name, flags) in [
        ("calls-plt", &["-O1", "-g"][..]),
        ("calls-ibt", &["-O1", "-g", "-fcf-protection=full"][..]),
        ("calls-noplt", &["-O1", "-g", "-fno-plt"][..]),
        ("calls-now", &["-O1", "-g", "-Wl,-z,now"][..]),
    ] {
        let got = callees_of(name, flags, Follow::Libraries);
        let want = [
            ("libc.so.6", "pthread_mutex_lock"),
            ("exe", "leaf"),
            ("libc.so.6", "pthread_mutex_unlock"),
        ]
        .map(|(f, s)| (f.to_string(), s.to_string()));
        assert_eq!(got, want, "{name}");
        let own = callees_of(name, flags, Follow::SameFile);
        assert_eq!(own, [want[1].clone()], "{name}");
    }
}

#[test]
fn library_functions_are_descended_into() {
    // Two levels below root the graph goes on inside libc, through the
    // functions libc exports (pthread_mutex_lock calls __assert_fail), and
    // never back into the executable.
    let exe = common::build("calls.c", "calls-plt", &["-O1", "-g"]);
    let edges = callees(&exe, "root", 2, Follow::Libraries).expect("call graph");
    let in_libc: Vec<_> = edges
        .iter()
        .filter(|(caller, _)| caller.binary != exe)
        .collect();
    assert!(!in_libc.is_empty(), "{edges:?}");
    for (caller, callee) in in_libc {
        assert_eq!(caller.binary, callee.binary, "{caller:?} → {callee:?}");
        assert!(caller.binary.ends_with("libc.so.6"), "{caller:?}");
    }
}

#[test]
fn an_unknown_root_is_one_line() {
    let err = callees(
        Path::new("/bin/true"),
        "no_such_function",
        1,
        Follow::SameFile,
    )
    .unwrap_err();
    assert!(err.contains("'no_such_function' not found"), "{err}");
    assert!(!err.contains('\n'));
}
