//! Which source files and objects may hold targets: `--scope GLOB`, or by
//! default the program's executable and the libraries it loaded that are
//! not the system's runtime.

/// File names (up to their version) of the libraries every program loads
/// from the system: the C and C++ runtimes, the loader, the math and thread
/// libraries. Their time is the program's calls into them, which the
/// caller's frame stands for.
const SYSTEM_RUNTIME: &[&str] = &[
    "libc",
    "ld-linux",
    "ld64",
    "ld",
    "libm",
    "libmvec",
    "libpthread",
    "libdl",
    "librt",
    "libresolv",
    "libutil",
    "libanl",
    "libstdc++",
    "libc++",
    "libc++abi",
    "libgcc_s",
    "libatomic",
    "libunwind",
    "linux-vdso",
    "linux-gate",
];

/// Whether the object at `path` is part of the system's runtime (see
/// [`SYSTEM_RUNTIME`]): `libc.so.6`, `ld-linux-x86-64.so.2`,
/// `libstdc++.so.6.0.30`, but not `libcrypto.so.3` or `librocksdb.so.8`.
pub fn is_system_runtime(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    // The name up to `.so` or `-2.31.so`: what the library is called.
    let stem = name.split(".so").next().unwrap_or(name);
    let stem = stem
        .rsplit_once('-')
        .filter(|(_, v)| v.starts_with(|c: char| c.is_ascii_digit()))
        .map_or(stem, |(s, _)| s);
    SYSTEM_RUNTIME.contains(&stem) || stem.starts_with("ld-linux")
}

/// Whether an object's code may hold targets: the main executable always;
/// with a `--scope`, the objects it matches; without one, every object that
/// is not the system's runtime.
pub fn object_in_scope(scope: Option<&str>, path: &str, is_main: bool) -> bool {
    is_main
        || match scope {
            Some(g) => scope_match(g, path),
            None => !is_system_runtime(path),
        }
}

/// Shell-style glob: `*` (within a path component), `**` (across them), `?`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    fn rec(p: &[u8], t: &[u8]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => (0..=t.len()).any(|i| rec(&p[2..], &t[i..])),
            Some(b'*') => {
                let mut i = 0;
                loop {
                    if rec(&p[1..], &t[i..]) {
                        return true;
                    }
                    if i >= t.len() || t[i] == b'/' {
                        return false;
                    }
                    i += 1;
                }
            }
            Some(b'?') => !t.is_empty() && t[0] != b'/' && rec(&p[1..], &t[1..]),
            Some(&c) => t.first() == Some(&c) && rec(&p[1..], &t[1..]),
        }
    }
    rec(pattern.as_bytes(), text.as_bytes())
}

/// A scope matches a path either whole or as its last components, so
/// `--scope 'src/*.c'` and `--scope '/home/me/app/**'` both work.
pub fn scope_match(pattern: &str, path: &str) -> bool {
    if glob_match(pattern, path) {
        return true;
    }
    path.match_indices('/')
        .any(|(i, _)| glob_match(pattern, &path[i + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*.c", "a.c"));
        assert!(!glob_match("*.c", "d/a.c"));
        assert!(glob_match("**.c", "d/a.c"));
        assert!(glob_match("/src/**", "/src/x/y.c"));
        assert!(glob_match("a?c", "abc"));
        assert!(scope_match("src/*.c", "/home/me/app/src/main.c"));
        assert!(!scope_match("lib/*.c", "/home/me/app/src/main.c"));
        assert!(scope_match("*causal*", "/w/workloads/causal_lock.c"));
    }

    #[test]
    fn the_system_runtime_is_out_of_the_default_scope() {
        for lib in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33",
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/lib/x86_64-linux-gnu/libpthread.so.0",
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/lib/libc-2.31.so",
            "linux-vdso.so.1",
        ] {
            assert!(is_system_runtime(lib), "{lib}");
            assert!(!object_in_scope(None, lib, false), "{lib}");
        }
        for lib in [
            "/usr/lib/x86_64-linux-gnu/librocksdb.so.8.9",
            "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
            "/usr/lib/libmagic.so.1",
            "/usr/lib/libldap-2.5.so.0",
            "/home/me/app/libwork.so",
        ] {
            assert!(!is_system_runtime(lib), "{lib}");
            assert!(object_in_scope(None, lib, false), "{lib}");
        }
        // A scope names the objects; the main executable is always in.
        assert!(!object_in_scope(
            Some("*rocksdb*"),
            "/usr/lib/libz.so.1",
            false
        ));
        assert!(object_in_scope(
            Some("*rocksdb*"),
            "/usr/lib/librocksdb.so.8",
            false
        ));
        assert!(object_in_scope(
            Some("*rocksdb*"),
            "/usr/bin/db_bench",
            true
        ));
        assert!(object_in_scope(
            None,
            "/lib/x86_64-linux-gnu/libc.so.6",
            true
        ));
    }
}
