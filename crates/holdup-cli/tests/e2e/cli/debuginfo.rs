//! Stripped binaries by name, without recording: the debug information of a
//! program is kept apart (`objcopy --only-keep-debug`) and served by a real
//! debuginfod server, and the probe specs of the stripped program come from
//! the debug file fetched by build-id.

use crate::support::debug_split::{build_id, private_cache, split};
use crate::support::debuginfod::*;
use crate::support::*;

/// Function and line specs of a stripped binary (`--progress` and
/// `--latency` of causal runs, `--func` of latency) are found in its debug
/// file, fetched from a debuginfod server as recordings fetch it: the C++
/// overloads by their demangled name, at the offsets the unstripped binary
/// gives them.
#[test]
fn probe_specs_of_a_stripped_binary_come_from_its_debug_file() {
    use holdup_coz::probe::{function_at, resolve};
    let _serial = serial();
    let dir = scratch("debuginfod_specs");
    let src = repo_root().join("workloads/overloads.cpp");
    let full = cxx(&src, &dir.join("overloads"), &["-O2"]);
    let bin = split(&full, &dir);
    let id = build_id(&bin);
    // Stripped, and no debug file found yet: no such function.
    let e = resolve(Some(&bin), "ns::Cls::work").unwrap_err();
    assert!(e.contains("no function 'ns::Cls::work'"), "{e}");

    let server = Debuginfod::serve(&dir.join("served"), &id);
    let cache = private_cache(&dir);
    // What `holdup causal run` and `holdup latency` do first, with this
    // test's cache and server.
    // Set in this process for the library calls below and taken away
    // again (also on a panic): the other end-to-end tests share the
    // process and must not meet this test's server.
    let _env = ScopedEnv::set(&[
        ("XDG_CACHE_HOME", cache.as_os_str()),
        ("DEBUGINFOD_URLS", server.url.as_ref()),
    ]);
    holdup_record::embed_symbols::find_debug_files_for_specs();
    let stripped = resolve(Some(&bin), "ns::Cls::work").unwrap();
    let unstripped = resolve(Some(&full), "ns::Cls::work").unwrap();
    assert_eq!(stripped.len(), 2);
    let offsets = |s: &[holdup_coz::probe::Site]| s.iter().map(|s| s.offset).collect::<Vec<_>>();
    assert_eq!(offsets(&stripped), offsets(&unstripped));
    // A line of the source names its function too (latency's --func FILE:LINE).
    let line = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("void Cls::work(int x)"))
        .unwrap()
        + 1;
    assert_eq!(
        function_at(&bin, &format!("overloads.cpp:{line}")),
        Ok("_ZN2ns3Cls4workEi".to_string())
    );
    assert!(cache
        .join("holdup/debuginfod")
        .join(format!("{id}.debug"))
        .is_file());
}

/// Environment variables set until dropped.
struct ScopedEnv(Vec<&'static str>);

impl ScopedEnv {
    fn set(vars: &[(&'static str, &std::ffi::OsStr)]) -> ScopedEnv {
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
        ScopedEnv(vars.iter().map(|(k, _)| *k).collect())
    }
}

impl Drop for ScopedEnv {
    fn drop(&mut self) {
        for k in &self.0 {
            std::env::remove_var(k);
        }
    }
}
