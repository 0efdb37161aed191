//! Creating the files holdup writes: traces, and every file derived from
//! one (pages, exports, flame graphs, wait-for graphs, latency files,
//! causal profiles). They carry the same command lines, paths and names as
//! the trace, and holdup usually runs as root, often in directories other
//! users can write (`/tmp`, a shared project directory). So an output is
//! readable by its owner only, like perf.data, and nothing another user
//! planted at its path is written through:
//!
//! - a symbolic link is refused, never followed (`O_NOFOLLOW`);
//! - a FIFO never blocks the open (`O_NONBLOCK`) and is refused, and so
//!   is anything else that is not a regular file;
//! - another user's file, or a file with other hard links, is replaced by
//!   a new file, never written into (its owner could read what we wrote,
//!   or a link to one of our files made elsewhere would change it too);
//! - a character device (`/dev/null`, a terminal) is written as it is:
//!   only root can make one.
//!
//! Where the file is new it is created 0600; an existing one is emptied and
//! narrowed to 0600.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Why an output path was refused, as a phrase that follows its path
/// (`cannot write x.html: it is a symbolic link …`).
fn refused(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

pub use holdup_traced::file_kind;

/// The open's error, said plainly where the path holds something planted.
fn open_error(path: &Path, e: io::Error) -> io::Error {
    let planted = std::fs::symlink_metadata(path).ok().map(|m| m.file_type());
    match (e.raw_os_error(), planted) {
        // ELOOP; EACCES from a kernel that guards links in sticky
        // directories.
        (_, Some(t)) if t.is_symlink() => refused(
            "it is a symbolic link, which holdup does not write through: remove it or choose another path"
                .into(),
        ),
        // A FIFO without a reader, or a socket.
        (Some(libc::ENXIO), Some(t)) => refused(format!(
            "it is {}: holdup writes its output to regular files (or `-` for standard output)",
            file_kind(t)
        )),
        _ => e,
    }
}

fn open(path: &Path, exclusive: bool, append: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).mode(0o600);
    if append {
        o.append(true);
    } else {
        o.write(true);
    }
    if exclusive {
        o.create_new(true);
    } else {
        o.create(true);
    }
    o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| open_error(path, e))
}

/// Create (or empty) the output file at `path`, readable by its owner
/// only, refusing what another user may have planted there (see the
/// module's documentation). The error says why in a phrase that reads
/// after the path.
pub fn create_private(path: &Path) -> io::Result<File> {
    open_private(path, false)
}

/// [`create_private`], or with `append` an existing file of ours kept as
/// it is and written at its end. Appending to another user's file, or to
/// a name with other hard links, is refused: replacing it would lose what
/// the user asked to keep. The file is open for reading too.
pub fn open_private(path: &Path, append: bool) -> io::Result<File> {
    let mut file = open(path, false, append)?;
    let mut md = file.metadata()?;
    let t = md.file_type();
    if t.is_char_device() {
        return Ok(file);
    }
    if !t.is_file() {
        return Err(refused(format!(
            "it is {}: holdup writes its output to regular files (or `-` for standard output)",
            file_kind(t)
        )));
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if md.uid() != me || md.nlink() > 1 {
        if append {
            return Err(refused(if md.uid() != me {
                format!(
                    "it belongs to uid {}, not to the user running holdup: remove it, or write elsewhere",
                    md.uid()
                )
            } else {
                "it has other hard links: remove it, or write elsewhere".into()
            }));
        }
        // Another user's file (who could read what we wrote into it), or
        // a second name of a file (whose other names would change too):
        // the name gets a new file of ours, the old one is left as it was.
        drop(file);
        std::fs::remove_file(path)?;
        file = open(path, true, false)?;
        md = file.metadata()?;
    }
    if !append {
        file.set_len(0)?;
    }
    if md.mode() & 0o7777 != 0o600 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    // Back to blocking writes (a regular file never blocks, but nothing
    // downstream should see a flag it did not ask for).
    // SAFETY: plain fcntl calls on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn new_and_rewritten_files_are_private_and_emptied() {
        let dir = holdup_testkit::scratch("output-mode");
        let path = dir.join("out");
        create_private(&path).unwrap().write_all(b"new").unwrap();
        assert_eq!(mode(&path), 0o600);
        std::fs::write(&path, b"a longer old content").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        create_private(&path).unwrap().write_all(b"x").unwrap();
        assert_eq!(
            (mode(&path), std::fs::read(&path).unwrap()),
            (0o600, b"x".to_vec())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn links_fifos_and_directories_are_refused_untouched() {
        let dir = holdup_testkit::scratch("output-planted");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("link")).unwrap();
        let err = create_private(&dir.join("link")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        // A dangling link is not followed to create its target either.
        std::os::unix::fs::symlink(dir.join("made"), dir.join("dangling")).unwrap();
        assert!(create_private(&dir.join("dangling")).is_err());
        assert!(!dir.join("made").exists());
        // A second name of the victim gets a file of its own.
        std::fs::hard_link(&victim, dir.join("hard")).unwrap();
        create_private(&dir.join("hard"))
            .unwrap()
            .write_all(b"new")
            .unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(dir.join("hard")).unwrap(), b"new");

        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        // Would block for ever without O_NONBLOCK: nobody reads it.
        let err = create_private(&fifo).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let err = create_private(&dir).unwrap_err();
        assert!(
            err.to_string().to_lowercase().contains("directory"),
            "{err}"
        );
        // A character device is written as it is, never narrowed.
        create_private(Path::new("/dev/null"))
            .unwrap()
            .write_all(b"x")
            .unwrap();
        assert_eq!(mode(Path::new("/dev/null")), 0o666);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
