//! Which source files and objects may hold targets: `--scope GLOB`.

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
}
