//! Symbol results of earlier recordings, one file per build-id, and the
//! running kernel's symbol table, in a per-user cache directory, so that
//! finishing a recording of programs already symbolized once needs no
//! symbol table or DWARF parsing, and no slow read of /proc/kallsyms.
//!
//! The recorder runs as root, often with another user's environment (sudo
//! keeps `$HOME`): the directory is found from the effective user's own
//! home (or a `$XDG_CACHE_HOME` that user owns), so no root-owned `.cache`
//! appears in someone else's home; it is used only if it is a real
//! directory (not a symlink) owned by us and closed to everyone else, and
//! files are opened relative to it without following symlinks, so nobody
//! can plant a link for root to write through or a file for root to trust.

use holdup_trace::symfile;
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use holdup_trace::symfile::FileSymbols;

pub struct SymbolCache {
    dir: OwnedFd,
    path: PathBuf,
}

/// The home directory of user `uid` in the password database.
fn home_of(uid: u32) -> Option<PathBuf> {
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: the buffers outlive the call; on success pw_dir points into
    // `buf`, copied out before it is freed.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    let dir = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
}

/// The owner of a directory that is not a link.
fn dir_owner(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::symlink_metadata(path).ok()?;
    md.is_dir().then(|| md.uid())
}

/// Where the cache of user `uid` lives: `$XDG_CACHE_HOME/holdup` if that
/// directory is the user's own, else `.cache/holdup` in the user's home
/// from the password database, if the home is the user's own. Not
/// `$HOME`: under sudo it is the invoking user's home, where root must not
/// make a root-owned `.cache` (nor trust one that user made).
fn cache_path_for(
    uid: u32,
    xdg: Option<PathBuf>,
    home: Option<PathBuf>,
    owner: impl Fn(&Path) -> Option<u32>,
) -> Option<PathBuf> {
    let ours = |p: &PathBuf| p.is_absolute() && owner(p) == Some(uid);
    if let Some(xdg) = xdg.filter(ours) {
        return Some(xdg.join("holdup"));
    }
    home.filter(ours).map(|h| h.join(".cache").join("holdup"))
}

fn cache_path() -> Option<PathBuf> {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let xdg = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from);
    cache_path_for(uid, xdg, home_of(uid), dir_owner)
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
        ours(&dir, true).then_some(Self { dir, path })
    }

    /// The path of a directory for other cached files (debug files
    /// fetched from debuginfod servers): inside this one, which no one
    /// else can enter.
    pub fn subdir(&self, name: &str) -> PathBuf {
        self.path.join(name)
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

    /// A scratch directory only its owner can enter, as the cache's is.
    fn scratch(name: &str) -> PathBuf {
        let dir = holdup_testkit::scratch(&format!("symcache-{name}"));
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

    #[test]
    fn the_cache_is_in_the_effective_users_own_directories() {
        let owners = |p: &Path| match p.to_str()? {
            "/root" | "/root/xdg" => Some(0),
            "/home/alice" | "/home/alice/.cache" => Some(1000),
            _ => None,
        };
        let p = |s: &str| Some(PathBuf::from(s));
        // sudo: XDG_CACHE_HOME of the invoking user is not root's.
        assert_eq!(
            cache_path_for(0, p("/home/alice/.cache"), p("/root"), owners),
            p("/root/.cache/holdup")
        );
        assert_eq!(
            cache_path_for(0, p("/root/xdg"), p("/root"), owners),
            p("/root/xdg/holdup")
        );
        // A home that is not the user's own (or none): no cache at all.
        assert_eq!(cache_path_for(0, None, p("/home/alice"), owners), None);
        assert_eq!(cache_path_for(0, None, p("/nonexistent"), owners), None);
        assert_eq!(cache_path_for(0, p("relative"), None, owners), None);
        assert_eq!(
            cache_path_for(1000, None, p("/home/alice"), owners),
            p("/home/alice/.cache/holdup")
        );
        // The password database's home of root, as the recorder sees it.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(home_of(0), p("/root"));
        }
    }
}
