//! A consumer for a BPF ring buffer map, by mmap of its fd.
//!
//! libbpf's consumer hands records to a callback that must own its state for
//! the life of the ring; this one borrows a closure per drain, hands out
//! records without copying, and needs nothing but libc, so that the causal
//! runtime inside the target process can read the same ring.
//!
//! Layout (kernel `bpf_ringbuf`): one page with the consumer position (ours to
//! write), then one page with the producer position followed by the data area,
//! mapped twice in a row so that a record that wraps is still contiguous. Each
//! record has an 8-byte header: length with BUSY/DISCARD bits, page offset.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SIZE: u64 = 8;

fn page_size() -> usize {
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Map `len` bytes of the ring (or of any map or perf event fd) at offset
/// `off`, shared, with `prot`.
pub(crate) fn map_shared(
    fd: BorrowedFd<'_>,
    off: usize,
    len: usize,
    prot: libc::c_int,
) -> io::Result<*mut u8> {
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            off as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

pub struct RingReader {
    consumer: *mut u8,
    producer: *mut u8,
    data_size: u64,
    page: usize,
}

// SAFETY: the mappings are owned by this value and only read/written through
// atomics or plain reads of committed records.
unsafe impl Send for RingReader {}

impl RingReader {
    /// Map the ring buffer whose map fd is `fd` and data size `data_size`
    /// (the map's max_entries, a power of two multiple of the page size).
    pub fn new(fd: BorrowedFd<'_>, data_size: u64) -> io::Result<Self> {
        let page = page_size();
        let consumer = map_shared(fd, 0, page, libc::PROT_READ | libc::PROT_WRITE)?;
        let producer = map_shared(fd, page, page + 2 * data_size as usize, libc::PROT_READ)
            .inspect_err(|_| unsafe {
                libc::munmap(consumer.cast(), page);
            })?;
        Ok(Self {
            consumer,
            producer,
            data_size,
            page,
        })
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        unsafe { &*(self.consumer as *const AtomicU64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        unsafe { &*(self.producer as *const AtomicU64) }
    }

    /// Bytes written by the kernel and not yet consumed.
    pub fn pending_bytes(&self) -> u64 {
        let prod = self.producer_pos().load(Ordering::Acquire);
        let cons = self.consumer_pos().load(Ordering::Acquire);
        prod.saturating_sub(cons)
    }

    /// Hand every committed record to `f`, oldest first; returns how many.
    /// Stops at the first record still being written.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let mask = self.data_size - 1;
        let data = unsafe { self.producer.add(self.page) };
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        // Ring position up to which the data has been prefetched.
        let mut fetched = cons;
        let mut n = 0;
        loop {
            let prod = self.producer_pos().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let mut progressed = false;
            while cons < prod {
                let hdr_ptr = unsafe { data.add((cons & mask) as usize) } as *const AtomicU64;
                // SAFETY: the header is 8-byte aligned inside the data area.
                let word = unsafe { (*hdr_ptr).load(Ordering::Acquire) };
                let len_flags = word as u32;
                if len_flags & BUSY_BIT != 0 {
                    self.consumer_pos().store(cons, Ordering::Release);
                    return n;
                }
                let len = (len_flags & !(BUSY_BIT | DISCARD_BIT)) as u64;
                // The records ahead were written by another CPU, mostly
                // long ago: every first load of one (its header, the stack
                // words an unwind reads) missed the cache and stalled the
                // loop. Asking for them a record's worth ahead overlaps
                // those misses with the work on this one.
                let ahead = (cons + PREFETCH_AHEAD).min(prod);
                fetched = fetched.max(cons);
                while fetched < ahead {
                    prefetch(unsafe { data.add((fetched & mask) as usize) });
                    fetched += 64;
                }
                if len_flags & DISCARD_BIT == 0 {
                    let start = unsafe { data.add(((cons + HDR_SIZE) & mask) as usize) };
                    // SAFETY: the data area is mapped twice, so `len` bytes
                    // from any offset inside it are readable.
                    f(unsafe { std::slice::from_raw_parts(start, len as usize) });
                    n += 1;
                }
                cons += (len + HDR_SIZE + 7) & !7;
                progressed = true;
            }
            self.consumer_pos().store(cons, Ordering::Release);
            if !progressed {
                break;
            }
        }
        n
    }
}

/// How far ahead of the record being handled the ring's data is prefetched:
/// about one blocked sample with its stack copy.
const PREFETCH_AHEAD: u64 = 2048;

fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it neither faults nor changes memory.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
}

impl Drop for RingReader {
    fn drop(&mut self) {
        unsafe {
            libc::munmap(self.consumer as *mut libc::c_void, self.page);
            libc::munmap(
                self.producer as *mut libc::c_void,
                self.page + 2 * self.data_size as usize,
            );
        }
    }
}

/// Read-only views of a ring's positions: whether anything is waiting, told
/// without the reader (the causal runtime's reader sits behind a lock).
pub struct RingPeek {
    consumer: *const AtomicU64,
    producer: *const AtomicU64,
}

// SAFETY: two read-only mappings owned by this value, read through atomics.
unsafe impl Send for RingPeek {}
unsafe impl Sync for RingPeek {}

impl RingPeek {
    pub fn new(fd: BorrowedFd<'_>) -> io::Result<Self> {
        let page = page_size();
        let consumer = map_shared(fd, 0, page, libc::PROT_READ)?;
        let producer = map_shared(fd, page, page, libc::PROT_READ).inspect_err(|_| unsafe {
            libc::munmap(consumer.cast(), page);
        })?;
        Ok(RingPeek {
            consumer: consumer.cast(),
            producer: producer.cast(),
        })
    }

    /// Records are waiting.
    pub fn pending(&self) -> bool {
        unsafe {
            (*self.producer).load(Ordering::Acquire) > (*self.consumer).load(Ordering::Acquire)
        }
    }
}

impl Drop for RingPeek {
    fn drop(&mut self) {
        let page = page_size();
        unsafe {
            libc::munmap(self.consumer as *mut libc::c_void, page);
            libc::munmap(self.producer as *mut libc::c_void, page);
        }
    }
}
