//! Advice that names the code inside the lock, from what the holders did
//! while a thread waited for their mutexes
//! ([`holdup_analysis::holder::inside_the_lock`]). It opens as the thread
//! advice for mutexes does.

use holdup_analysis::holder::{HolderDoing, InsideTheLock};

/// One line of advice: what to change inside the critical section.
pub fn holder(i: &InsideTheLock) -> String {
    let (share, inside) = (i.waiting_pct, i.inside_pct);
    let head = format!(
        "{share:.0}% waiting for mutexes held by other threads; inside the critical section the holder"
    );
    match &i.doing {
        HolderDoing::Runnable => format!(
            "{head} is runnable but not running {inside:.0}% of the time: give the holder a core (fewer runnable threads, or a higher priority for it)"
        ),
        HolderDoing::Io(name) => format!(
            "{head} spends {inside:.0}% in {name} [I]: move the I/O out of the lock"
        ),
        HolderDoing::OtherLock(name) => format!(
            "{head} waits {inside:.0}% for another lock in {name} [L]: nested locks serialize both"
        ),
        HolderDoing::Blocked(name) => format!(
            "{head} spends {inside:.0}% blocked in {name} [B] (a sleep, a pipe, a socket, a poll): do not block while holding the lock"
        ),
        HolderDoing::Allocating(name) => format!(
            "{head} spends {inside:.0}% allocating in {name} [.]: allocate before taking the lock"
        ),
        HolderDoing::Running(name) => format!(
            "{head} spends {inside:.0}% running {name} [.]: shorten that code or split the lock"
        ),
    }
}
