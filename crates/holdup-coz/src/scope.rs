//! Which source files and objects may hold targets: `--scope GLOB`, or by
//! default the program's executable and the libraries it loaded that are
//! not the system's runtime; of a Python program, its own source files
//! and the packages it installed, not the standard library.

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
/// is not the system's runtime nor part of Python's standard library (its
/// extension modules, `lib/python3.12/lib-dynload/_json.cpython-312….so`).
pub fn object_in_scope(scope: Option<&str>, path: &str, is_main: bool) -> bool {
    is_main
        || match scope {
            Some(g) => scope_match(g, path),
            None => !is_system_runtime(path) && !is_python_stdlib(path),
        }
}

/// Whether a file is part of a Python installation's standard library:
/// under a `lib/pythonX.Y/` directory but not in its `site-packages` (or
/// Debian's `dist-packages`), where the packages a program installed go.
pub fn is_python_stdlib(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let Some(at) = parts
        .windows(2)
        .position(|w| w[0] == "lib" && is_python_dir(w[1]))
    else {
        return false;
    };
    !parts[at + 2..]
        .iter()
        .any(|&p| p == "site-packages" || p == "dist-packages")
}

/// `python3.12`: a versioned library directory of CPython.
fn is_python_dir(dir: &str) -> bool {
    dir.strip_prefix("python")
        .and_then(|v| v.split_once('.'))
        .is_some_and(|(major, minor)| {
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
            digits(major) && digits(minor)
        })
}

/// Whether the Python source file `file` (a code object's file name) may
/// hold targets: with a `--scope`, the files it matches; without one, the
/// program's own files and installed packages, not the standard library
/// nor code without a file (`<frozen importlib._bootstrap>`, `<string>`).
pub fn python_file_in_scope(scope: Option<&str>, file: &str) -> bool {
    match scope {
        Some(g) => scope_match(g, file),
        None => !file.starts_with('<') && !is_python_stdlib(file),
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
    fn pythons_standard_library_is_out_of_the_default_scope() {
        for stdlib in [
            "/usr/lib/python3.11/json/decoder.py",
            "/opt/lib/tools/lib/python3.10/os.py",
            "/root/.pyenv/versions/3.12.1/lib/python3.12/threading.py",
            "/usr/local/lib/python3.13/lib-dynload/_json.cpython-313-x86_64-linux-gnu.so",
        ] {
            assert!(is_python_stdlib(stdlib), "{stdlib}");
            assert!(!python_file_in_scope(None, stdlib), "{stdlib}");
            assert!(!object_in_scope(None, stdlib, false), "{stdlib}");
        }
        for own in [
            "/srv/app/app.py",
            "app.py",
            "/usr/lib/python3.11/site-packages/requests/api.py",
            "/usr/lib/python3/dist-packages/yaml/loader.py",
            "/home/me/lib/python/work.py",
            "/home/me/venv/lib/python3.12/site-packages/numpy/core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
        ] {
            assert!(!is_python_stdlib(own), "{own}");
            assert!(python_file_in_scope(None, own), "{own}");
        }
        // Code without a file; a scope names the files instead.
        assert!(!python_file_in_scope(None, "<frozen importlib._bootstrap>"));
        assert!(!python_file_in_scope(None, "<string>"));
        assert!(python_file_in_scope(
            Some("**/json/*.py"),
            "/usr/lib/python3.11/json/decoder.py"
        ));
        assert!(!python_file_in_scope(Some("app/*.py"), "/srv/other.py"));
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
