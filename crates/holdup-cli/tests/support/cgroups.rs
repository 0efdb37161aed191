//! Test cgroups (v2): where the hierarchy is mounted, and directories made
//! below it that are removed, children first, when the test ends.

use std::path::PathBuf;

/// Where the cgroup v2 hierarchy is mounted (hybrid systems put it below
/// /sys/fs/cgroup).
pub fn cgroup2_mount() -> PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let mount = left.split(' ').nth(4)?;
            right.starts_with("cgroup2 ").then(|| PathBuf::from(mount))
        })
        .expect("a cgroup2 mount")
}

/// Cgroup directories, parents first, made now and removed (children
/// first) when dropped; their processes must be gone by then.
pub struct Cgroups(pub Vec<PathBuf>);

impl Cgroups {
    pub fn make(dirs: Vec<PathBuf>) -> Self {
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        Self(dirs)
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
