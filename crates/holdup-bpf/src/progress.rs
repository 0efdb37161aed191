//! Progress points counted in the kernel without a trap (`progress.bpf.c`):
//! a system call or a tracepoint. Each point is its own loaded object, its
//! per-CPU visits in its mapped `.bss`. The causal runtime inside the
//! program maps the same `.bss` from an inherited fd and sums it
//! ([`MappedVisits`], no libbpf).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// As in `progress.h`.
const MAX_CPUS: usize = crate::bindings::progress::PROGRESS_MAX_CPUS as usize;
type Slot = crate::bindings::progress::progress_slot;

/// The bytes of `.bss` that hold the slots (its only variable).
pub const BSS_BYTES: usize = MAX_CPUS * std::mem::size_of::<Slot>();

/// A point's per-CPU visits, mapped read-only from its `.bss` map.
pub struct MappedVisits {
    slots: *const Slot,
}

// SAFETY: a read-only mapping that lives as long as the value; slots are
// read with volatile loads.
unsafe impl Send for MappedVisits {}
unsafe impl Sync for MappedVisits {}

impl MappedVisits {
    /// Map the `.bss` of a point's object from its map's fd.
    pub fn map(fd: BorrowedFd<'_>) -> io::Result<MappedVisits> {
        // SAFETY: a fresh shared read-only mapping of BSS_BYTES of a map
        // that is at least that large; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BSS_BYTES,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedVisits { slots: p.cast() })
    }

    /// Visits so far, all CPUs.
    pub fn total(&self) -> u64 {
        (0..MAX_CPUS)
            // SAFETY: within the mapping; the kernel updates the slots.
            .map(|i| unsafe { std::ptr::read_volatile(&(*self.slots.add(i)).visits) })
            .sum()
    }
}

impl Drop for MappedVisits {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.slots as *mut libc::c_void, BSS_BYTES) };
    }
}

#[cfg(feature = "loader")]
pub use loader::{Counted, PointCounter, Source};

#[cfg(feature = "loader")]
mod loader {
    use super::MappedVisits;
    use crate::recorder::{Error, Result};
    use crate::skel::progress::{OpenProgressSkel, ProgressSkel, ProgressSkelBuilder};
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    use libbpf_rs::{Link, MapCore, MapFlags};
    use std::mem::MaybeUninit;
    use std::os::fd::{AsFd, BorrowedFd};

    /// What a point counts.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Source {
        /// Entries into the system call of this x86-64 number.
        Syscall(u32),
        /// Hits of the tracepoint of this name (its raw name, as
        /// `tp_btf` attaches: `sched_switch`, `block_rq_complete`).
        Tracepoint(String),
    }

    /// Whose visits count.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Counted {
        /// Every process's (`-a`).
        All,
        /// Those of the processes given to [`PointCounter::track`] and
        /// their children.
        Tracked,
    }

    /// One loaded point; detached when dropped.
    pub struct PointCounter {
        skel: Box<ProgressSkel<'static>>,
        visits: MappedVisits,
        _links: Vec<Link>,
    }

    impl PointCounter {
        pub fn start(source: &Source, counted: Counted) -> Result<PointCounter> {
            if unsafe { libc::geteuid() } != 0 {
                return Err(Error::Permission);
            }
            // One small object per point, for the run: its storage is
            // leaked with it (a run has a few points).
            let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
                Box::leak(Box::new(MaybeUninit::uninit()));
            let mut open: OpenProgressSkel<'static> = ProgressSkelBuilder::default()
                .open(storage)
                .map_err(|e| Error::Load(e.to_string()))?;
            let rodata = open.maps.rodata_data.as_deref_mut().expect("rodata");
            rodata.all_processes = u32::from(counted == Counted::All);
            match source {
                Source::Syscall(nr) => {
                    rodata.syscall_nr = *nr;
                    open.progs.count_tracepoint.set_autoload(false);
                }
                Source::Tracepoint(name) => {
                    open.progs.count_syscall.set_autoload(false);
                    open.progs
                        .count_tracepoint
                        .set_attach_target(0, Some(name.clone()))
                        .map_err(|e| Error::Load(e.to_string()))?;
                }
            }
            let skel = Box::new(open.load().map_err(|e| Error::Load(e.to_string()))?);
            let mut links = Vec::new();
            let (name, prog) = match source {
                Source::Syscall(_) => ("count_syscall", &skel.progs.count_syscall),
                Source::Tracepoint(_) => ("count_tracepoint", &skel.progs.count_tracepoint),
            };
            for (name, prog) in [(name, prog), ("follow_fork", &skel.progs.follow_fork)] {
                links.push(prog.attach().map_err(|e| Error::Attach {
                    prog: name,
                    msg: e.to_string(),
                })?);
            }
            let visits = MappedVisits::map(skel.maps.bss.as_fd())?;
            Ok(PointCounter {
                skel,
                visits,
                _links: links,
            })
        }

        /// Count the visits of process `pid` (and of the children it
        /// starts from now on).
        pub fn track(&self, pid: u32) -> Result<()> {
            self.skel
                .maps
                .counted
                .update(&pid.to_ne_bytes(), &[1], MapFlags::ANY)
                .map_err(|e| Error::Load(format!("cannot count pid {pid}: {e}")))
        }

        pub fn visits(&self) -> u64 {
            self.visits.total()
        }

        /// The `.bss` map, which a process that inherits it maps with
        /// [`MappedVisits::map`].
        pub fn visits_fd(&self) -> BorrowedFd<'_> {
            self.skel.maps.bss.as_fd()
        }
    }
}
