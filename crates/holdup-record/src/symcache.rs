//! Symbol results of earlier recordings, one file per build-id, and the
//! running kernel's symbol table, in a per-user cache directory, so that
//! finishing a recording of programs already symbolized once needs no
//! symbol table or DWARF parsing, and no slow read of /proc/kallsyms.
//!
//! The recorder runs as root, often with another user's environment: the
//! directory is used only if it is a real directory (not a symlink) owned by
//! us and closed to everyone else, and files are opened relative to it
//! without following symlinks, so nobody can plant a link for root to write
//! through or a file for root to trust.

use holdup_trace::symfile;
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub use holdup_trace::symfile::FileSymbols;

pub struct SymbolCache {
    dir: OwnedFd,
}

/// `$XDG_CACHE_HOME/holdup`, else `$HOME/.cache/holdup`.
fn cache_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache"))
                .filter(|p| p.is_absolute())
        })?;
    Some(base.join("holdup"))
}

fn cstr(bytes: &[u8]) -> Option<CString> {
    CString::new(bytes).ok()
}

/// Owned by us, and not a symlink, and (for a directory) closed to others.
fn ours(fd: &OwnedFd, dir: bool) -> bool {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    let kind = st.st_mode & libc::S_IFMT;
    let kind_ok = if dir {
        kind == libc::S_IFDIR && st.st_mode & 0o077 == 0
    } else {
        kind == libc::S_IFREG
    };
    kind_ok && st.st_uid == unsafe { libc::geteuid() }
}

impl SymbolCache {
    /// The cache directory, created if missing; None when there is none we
    /// can trust (then nothing is cached).
    pub fn open() -> Option<Self> {
        Self::open_at(cache_path()?)
    }

    pub fn open_at(path: PathBuf) -> Option<Self> {
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let c = cstr(path.as_os_str().as_bytes())?;
        unsafe { libc::mkdir(c.as_ptr(), 0o700) };
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        ours(&dir, true).then_some(Self { dir })
    }

    fn name(key: &[u8]) -> String {
        format!("{}.sym", holdup_trace::build_id_hex(key))
    }

    fn open_file(&self, name: &str, flags: i32) -> Option<OwnedFd> {
        let c = cstr(name.as_bytes())?;
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// What earlier recordings found under `key` (a file's build-id).
    pub fn load(&self, key: &[u8]) -> FileSymbols {
        self.load_text(key)
            .and_then(|t| symfile::parse(&t))
            .unwrap_or_default()
    }

    /// Replace the entry under `key` with `symbols`.
    pub fn store(&self, key: &[u8], symbols: &FileSymbols) {
        self.store_text(key, &symfile::format(symbols));
    }

    /// The text stored under `key`.
    pub fn load_text(&self, key: &[u8]) -> Option<String> {
        let mut text = String::new();
        let fd = self.open_file(&Self::name(key), libc::O_RDONLY)?;
        if !ours(&fd, false) || File::from(fd).read_to_string(&mut text).is_err() {
            return None;
        }
        Some(text)
    }

    /// Store `text` under `key` (written whole, then renamed into place, so
    /// a reader never sees half of it).
    pub fn store_text(&self, key: &[u8], text: &str) {
        let name = Self::name(key);
        let tmp = format!(".{name}.{}", std::process::id());
        let Some(fd) = self.open_file(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL) else {
            return;
        };
        let ok = File::from(fd).write_all(text.as_bytes()).is_ok();
        let (Some(from), Some(to)) = (cstr(tmp.as_bytes()), cstr(name.as_bytes())) else {
            return;
        };
        let d = self.dir.as_raw_fd();
        if !ok || unsafe { libc::renameat(d, from.as_ptr(), d, to.as_ptr()) } != 0 {
            unsafe { libc::unlinkat(d, from.as_ptr(), 0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_trace::symfile::FORMAT;
    use holdup_trace::SymFrame;
    use std::os::unix::fs::PermissionsExt;

    fn frame(function: &str, file: Option<&str>, line: u32) -> SymFrame {
        SymFrame {
            function: function.into(),
            file: file.map(Into::into),
            line,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("holdup-symcache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn symbols_stored_are_loaded_back() {
        let dir = scratch("roundtrip");
        let cache = SymbolCache::open_at(dir.join("holdup")).expect("a cache");
        let mut syms = FileSymbols::new();
        syms.insert(
            0x1234,
            vec![frame("inner", Some("a.c"), 7), frame("outer", None, 0)],
        );
        syms.insert(0x10, Vec::new());
        cache.store(b"\xab\xcd", &syms);
        assert_eq!(cache.load(b"\xab\xcd"), syms);
        assert!(cache.load(b"\x01").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_planted_symlink_is_neither_followed_nor_trusted() {
        let dir = scratch("planted");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        // The cache directory itself is a link: no cache at all.
        std::os::unix::fs::symlink(&dir, dir.join("holdup")).unwrap();
        assert!(SymbolCache::open_at(dir.join("holdup")).is_none());
        std::fs::remove_file(dir.join("holdup")).unwrap();

        // A file in it is a link: never read, and writing replaces the
        // link, never the file it points to.
        let cache = SymbolCache::open_at(dir.join("holdup")).expect("a cache");
        let name = SymbolCache::name(b"\x01\x02");
        std::fs::write(dir.join("forged"), format!("{FORMAT}\n10\tevil\t\t1\n")).unwrap();
        std::os::unix::fs::symlink(dir.join("forged"), dir.join("holdup").join(&name)).unwrap();
        assert!(cache.load(b"\x01\x02").is_empty());
        std::fs::remove_file(dir.join("holdup").join(&name)).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("holdup").join(&name)).unwrap();
        let mut syms = FileSymbols::new();
        syms.insert(1, vec![frame("f", None, 0)]);
        cache.store(b"\x01\x02", &syms);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(cache.load(b"\x01\x02"), syms);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_open_to_others_is_not_used() {
        let dir = scratch("open");
        let path = dir.join("holdup");
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(SymbolCache::open_at(path).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
