//! Stripped binaries whose debug information is kept apart, as
//! distributions ship them (`-dbgsym` packages, debuginfod servers).

use super::Bounded;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `bin`'s debug file into `dir/served/`, and a stripped copy of `bin`
/// (its build-id kept).
pub fn split(bin: &Path, dir: &Path) -> PathBuf {
    let served = dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let stripped = dir.join(format!(
        "{}-stripped",
        bin.file_name().unwrap().to_string_lossy()
    ));
    let debug = served.join("work.debug");
    let steps: [(&str, Vec<&std::ffi::OsStr>); 2] = [
        (
            "objcopy",
            vec![
                "--only-keep-debug".as_ref(),
                bin.as_os_str(),
                debug.as_os_str(),
            ],
        ),
        (
            "strip",
            vec!["-o".as_ref(), stripped.as_os_str(), bin.as_os_str()],
        ),
    ];
    for (tool, args) in steps {
        assert!(
            Command::new(tool).args(args).bounded_status().success(),
            "{tool}"
        );
    }
    stripped
}

/// The build-id of an ELF file, in hex.
pub fn build_id(bin: &Path) -> String {
    let out = Command::new("readelf").arg("-n").arg(bin).bounded_output();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("a build-id")
}

/// A directory for `XDG_CACHE_HOME` under `dir`: root's own, closed to
/// others, as the recorder trusts a cache.
pub fn private_cache(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let cache = dir.join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    cache
}
