//! `--cgroup PATH`: the cgroup (v2) a recording is limited to. The programs
//! test membership by id and depth (`tracked.h`); this finds both from the
//! path, and tells the session when the cgroup is gone.

use anyhow::{bail, Context};
use holdup_bpf::CgroupFilter;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// A cgroup found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    /// Its directory under the v2 mount.
    pub dir: PathBuf,
    /// Its path below the v2 root, as /proc/PID/cgroup shows it ("/" for
    /// the root).
    pub path: String,
    pub filter: CgroupFilter,
}

/// Where the cgroup v2 hierarchy is mounted, from a mountinfo text: the
/// mount point (field 5) of the first line whose file system type (after
/// the " - " separator) is cgroup2. Hybrid systems mount it below
/// /sys/fs/cgroup, so it is never assumed.
fn v2_mount_in(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (mount, rest) = line.split_once(" - ")?;
        (rest.split(' ').next()? == "cgroup2").then_some(())?;
        mount.split(' ').nth(4).map(|p| PathBuf::from(unescape(p)))
    })
}

/// Mountinfo writes spaces and other bytes as `\ooo` octal escapes.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup `path` names: a directory under the v2 mount, or a path below
/// the v2 root as /proc/PID/cgroup shows it (`/system.slice/x.service`).
pub fn resolve(path: &Path) -> anyhow::Result<Cgroup> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").context("reading the mounts")?;
    let Some(mount) = v2_mount_in(&info) else {
        bail!("--cgroup needs the cgroup v2 hierarchy, and none is mounted");
    };
    resolve_under(&mount, path)
}

fn resolve_under(mount: &Path, path: &Path) -> anyhow::Result<Cgroup> {
    let mount = &mount.canonicalize().unwrap_or_else(|_| mount.to_path_buf());
    let dir = if path.starts_with(mount) {
        path.to_path_buf()
    } else {
        mount.join(path.strip_prefix("/").unwrap_or(path))
    };
    let not_found = || {
        format!(
            "no cgroup {}: no such directory in the cgroup v2 hierarchy (mounted at {})",
            path.display(),
            mount.display()
        )
    };
    let dir = dir.canonicalize().with_context(not_found)?;
    let below = match dir.strip_prefix(mount) {
        Ok(b) if dir.join("cgroup.procs").exists() => b.to_path_buf(),
        _ => bail!(not_found()),
    };
    let level = below
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count() as u32;
    let id = std::fs::metadata(&dir).with_context(not_found)?.ino();
    Ok(Cgroup {
        path: format!("/{}", below.display()),
        dir,
        filter: CgroupFilter { id, level },
    })
}

impl Cgroup {
    /// Whether the directory is still this cgroup (not removed, nor
    /// removed and made again: a new one has a new id).
    pub fn still_there(&self) -> bool {
        std::fs::metadata(&self.dir).is_ok_and(|m| m.ino() == self.filter.id)
    }

    /// Whether process `pid` is in this cgroup or below it now, from its
    /// v2 line (`0::/path`) in /proc/PID/cgroup.
    pub fn holds(&self, pid: u32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        text.lines()
            .filter_map(|l| l.strip_prefix("0::"))
            .any(|p| Path::new(p).starts_with(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 1 0:23 / /sys rw,nosuid - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
33 30 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
";

    #[test]
    fn the_v2_mount_is_found_where_it_is() {
        assert_eq!(v2_mount_in(HYBRID), Some("/sys/fs/cgroup/unified".into()));
        assert_eq!(v2_mount_in(&HYBRID.replace("cgroup2 cgroup2", "x x")), None);
        let spaced = "40 1 0:30 / /mnt/a\\040b rw - cgroup2 none rw\n";
        assert_eq!(v2_mount_in(spaced), Some("/mnt/a b".into()));
    }

    #[test]
    fn a_path_is_taken_under_the_mount_or_as_it_is() {
        let root = std::env::temp_dir().join(format!("holdup-cg-{}", std::process::id()));
        let child = root.join("a/b");
        std::fs::create_dir_all(&child).unwrap();
        std::fs::write(child.join("cgroup.procs"), "").unwrap();
        std::fs::write(root.join("a/cgroup.procs"), "").unwrap();
        let by_name = resolve_under(&root, Path::new("/a/b")).unwrap();
        let by_dir = resolve_under(&root, &child).unwrap();
        assert_eq!(by_name, by_dir);
        assert_eq!(by_name.filter.level, 2);
        assert_eq!(by_name.path, "/a/b");
        assert_eq!(
            resolve_under(&root, Path::new("a")).unwrap().filter.level,
            1
        );
        let e = resolve_under(&root, Path::new("/nope")).unwrap_err();
        assert!(format!("{e:#}").starts_with("no cgroup /nope: no such directory"));
        // A directory that is not a cgroup (no cgroup.procs) is refused too.
        std::fs::create_dir_all(root.join("plain")).unwrap();
        assert!(resolve_under(&root, Path::new("/plain")).is_err());
        assert!(by_dir.still_there());
        std::fs::remove_dir_all(&root).unwrap();
        assert!(!by_dir.still_there());
    }
}
