//! Opening the files of traced processes (executables, libraries, debug
//! files) as root, when their owners may be hostile.
//!
//! The owner of a traced program controls the paths of its mappings: it can
//! delete a library it mapped and put a FIFO there (an open for reading
//! would wait for a writer for ever), a link to something else, or truncate
//! a file holdup has mapped (the next read of the map kills holdup with
//! SIGBUS). So:
//!
//! - a file is opened with `O_NONBLOCK|O_NOFOLLOW` (the kernel's own magic
//!   links, `/proc/PID/map_files/…` and `/proc/self/fd/…`, are followed:
//!   they name the very file that is mapped or open) and must be a regular
//!   file, else it is refused with a phrase saying what it is;
//! - only a file that no one but root can change is mapped; any other is
//!   read into memory (at most [`MAX_COPY`] bytes), or only the parts of it
//!   that are needed;
//! - a library that opens files by path itself is handed either a path of
//!   root's that no one else can change ([`stable_path`]) or a private
//!   copy in memory ([`memory_copy`]).

use memmap2::Mmap;
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::ops::Deref;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// The largest file read into memory (a file only root can change is
/// mapped instead, whatever its size).
pub const MAX_COPY: u64 = 1 << 30;

/// Why a file was not read although it could be opened: it is not what a
/// mapped file can be, or too large to copy. Carried inside an
/// `io::Error`, so that callers can count refusals apart from files that
/// are simply gone.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Whether `e` is a refusal of this module (not, say, a missing file).
pub fn is_refusal(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Refused>())
}

fn refused(why: String) -> io::Error {
    io::Error::other(Refused(why))
}

/// The kernel's links to an open or mapped file: `/proc/PID/map_files/X`
/// or `/proc/PID/fd/N` (PID a number or `self`).
fn is_magic_link(path: &Path) -> bool {
    let parts: Vec<Component> = path.components().collect();
    matches!(
        parts.as_slice(),
        [Component::RootDir, Component::Normal(proc), Component::Normal(pid), Component::Normal(dir), Component::Normal(_)]
            if *proc == "proc"
                && (*pid == "self" || pid.to_str().is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit())))
                && (*dir == "map_files" || *dir == "fd")
    )
}

/// Open a file of a traced process for reading: never blocks, never
/// follows a link its owner may have planted, and refuses anything but a
/// regular file.
pub fn open(path: &Path) -> io::Result<(File, Metadata)> {
    let mut flags = libc::O_NONBLOCK;
    if !is_magic_link(path) {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            // ELOOP, or EACCES where the kernel guards links in sticky
            // directories.
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            if link && flags & libc::O_NOFOLLOW != 0 {
                refused("a symbolic link, not followed".into())
            } else {
                e
            }
        })?;
    let md = file.metadata()?;
    if !md.is_file() {
        let what = file_kind(md.file_type());
        return Err(refused(format!("{what}, not a regular file")));
    }
    Ok((file, md))
}

/// What a file that is not a regular file is, for a message.
pub fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Whether only root can change the file, so that mapping it is safe: no
/// one else can truncate it under the map.
pub fn may_map(md: &Metadata) -> bool {
    md.uid() == 0 && md.mode() & 0o022 == 0
}

/// A whole file: mapped where [`may_map`] allows, else copied.
pub enum Contents {
    Mapped(Mmap),
    Copied(Vec<u8>),
}

impl Deref for Contents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Contents::Mapped(m) => m,
            Contents::Copied(v) => v,
        }
    }
}

fn too_large(md: &Metadata) -> io::Error {
    refused(format!(
        "{} MiB, more than the {} MiB holdup copies of a file that others than root can change",
        md.len() >> 20,
        MAX_COPY >> 20
    ))
}

/// The bytes of an open file, read with `pread` up to its size when it
/// was opened: a file that shrinks meanwhile gives fewer bytes, never a
/// fault.
fn copy(file: &File, md: &Metadata) -> io::Result<Vec<u8>> {
    if md.len() > MAX_COPY {
        return Err(too_large(md));
    }
    let mut buf = vec![0u8; md.len() as usize];
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

/// The whole of an open file (see [`Contents`]).
pub fn contents(file: &File, md: &Metadata) -> io::Result<Contents> {
    if may_map(md) {
        // SAFETY: read-only and private; only root can truncate the file
        // (package managers replace files by rename, which leaves our
        // inode whole).
        return unsafe { Mmap::map(file) }.map(Contents::Mapped);
    }
    copy(file, md).map(Contents::Copied)
}

/// [`open`] and [`contents`].
pub fn read(path: &Path) -> io::Result<Contents> {
    let (file, md) = open(path)?;
    contents(&file, &md)
}

/// The path of `file` (opened from `path`) if no one but root can change
/// what it names: the file itself and every directory above it belong to
/// root and are closed to others' writes. Code that opens files by path,
/// and files next to them (blazesym: debug links, `.dwp`), may be given
/// this path.
pub fn stable_path(path: &Path, md: &Metadata) -> Option<PathBuf> {
    if !may_map(md) {
        return None;
    }
    // Resolves links with lstat and readlink only: opens nothing.
    let real = std::fs::canonicalize(path).ok()?;
    let now = std::fs::symlink_metadata(&real).ok()?;
    if (now.dev(), now.ino()) != (md.dev(), md.ino()) || !may_map(&now) {
        return None;
    }
    let dirs_are_roots = real
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::symlink_metadata(dir).is_ok_and(|d| d.is_dir() && may_map(&d)));
    dirs_are_roots.then_some(real)
}

/// A copy of an open file in anonymous memory (a memfd), for code that
/// opens files by path: it is given `/proc/self/fd/N`, which nobody else
/// can change, and finds nothing next to it.
pub fn memory_copy(file: &File, md: &Metadata) -> io::Result<(File, PathBuf)> {
    let bytes = copy(file, md)?;
    // SAFETY: a new descriptor that nothing else owns.
    let fd = unsafe { libc::memfd_create(c"holdup-elf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let copy = unsafe { File::from_raw_fd(fd) };
    copy.write_all_at(&bytes, 0)?;
    let path = PathBuf::from(format!("/proc/self/fd/{}", copy.as_raw_fd()));
    Ok((copy, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn fifos_links_and_directories_are_refused_without_blocking() {
        let dir = holdup_testkit::scratch("traced-refused");
        let fifo = dir.join("lib.so");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = open(&fifo).unwrap_err();
        assert!(
            is_refusal(&err) && err.to_string() == "a FIFO, not a regular file",
            "{err}"
        );
        std::fs::write(dir.join("real"), b"\x7fELF").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        let err = open(&dir.join("link")).unwrap_err();
        assert!(is_refusal(&err), "{err}");
        assert!(is_refusal(&open(&dir).unwrap_err()));
        assert!(!is_refusal(&open(&dir.join("missing")).unwrap_err()));
        // The kernel's own links are followed.
        let (f, _) = open(&dir.join("real")).unwrap();
        let fd = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
        assert_eq!(&*read(&fd).unwrap(), b"\x7fELF");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_files_of_roots_are_mapped_or_named_by_path() {
        let dir = holdup_testkit::scratch("traced-owners");
        // In a directory everyone can write (as /tmp is).
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (file, md) = open(&path).unwrap();
        let ours = unsafe { libc::geteuid() } == 0;
        assert_eq!(
            matches!(contents(&file, &md).unwrap(), Contents::Mapped(_)),
            ours
        );
        // A file in a directory everyone can write has no stable path.
        assert!(stable_path(&path, &md).is_none());
        let libc_so = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
        if let Ok((_, md)) = open(libc_so) {
            let stable = stable_path(libc_so, &md).expect("libc is root's");
            assert!(stable.ends_with("libc.so.6"), "{stable:?}");
        }
        // Group-writable: copied.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        let (file, md) = open(&path).unwrap();
        assert!(matches!(contents(&file, &md).unwrap(), Contents::Copied(_)));
        let (_copy, at) = memory_copy(&file, &md).unwrap();
        assert_eq!(std::fs::read(&at).unwrap(), b"0123456789");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn magic_links_are_recognised_by_shape() {
        for (p, magic) in [
            ("/proc/12/map_files/7f00-7f10", true),
            ("/proc/self/fd/3", true),
            ("/proc/12/root/usr/lib/x.so", false),
            ("/proc/12/map_files", false),
            ("/tmp/proc/1/fd/3", false),
            ("/proc/x1/fd/3", false),
        ] {
            assert_eq!(is_magic_link(Path::new(p)), magic, "{p}");
        }
    }
}
