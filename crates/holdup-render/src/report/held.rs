//! The line under a blocked row that says what the threads that ended its
//! waits did meanwhile: `while held: sync_under_lock → fdatasync [I] 55%,
//! [S] 38%; sync_under_lock → write [.] 7%`.

use holdup_analysis::holder::{Activity, RowHeld};
use holdup_analysis::profile::Row;
use holdup_analysis::stacks::LockKind;
use std::collections::HashMap;
use std::io::{self, Write};

/// How the line starts, by what the row waited for.
pub fn lead(kind: Option<LockKind>) -> &'static str {
    match kind {
        Some(LockKind::Mutex) => "while held",
        Some(LockKind::Gil) => "while the GIL was held",
        Some(LockKind::Signal) => "until signalled",
        // An idle thread waits for work: what the thread that gave it
        // some did until then.
        Some(LockKind::Idle) | None => "until woken",
    }
}

/// What an activity is called in the line, without its subclass: its site,
/// or what kept it from having one.
fn what(a: &Activity) -> String {
    match a.state {
        "not_alive" => "(not yet created or exited)".into(),
        "cut" => "(a cycle: damaged trace)".into(),
        _ => a.site.clone().unwrap_or_else(|| "(no sample)".into()),
    }
}

/// Who did it, when that needs saying: a thread further down the chain
/// (`feeder:12 via relay:11 [B]: `), or one of several holders.
fn who(a: &Activity, several: bool) -> String {
    if a.via.is_empty() {
        return if several {
            format!("{}: ", a.thread)
        } else {
            String::new()
        };
    }
    let via: Vec<String> = a
        .via
        .iter()
        .map(|v| format!("{} {}", v.thread, v.class.tag()))
        .collect();
    format!("{} via {}: ", a.thread, via.join(" → "))
}

fn pct(n: f64, total: f64) -> f64 {
    if total <= 0.0 {
        0.0
    } else {
        100.0 * n / total
    }
}

/// A site's name, its weight, and its weight per subclass tag.
type SiteMix = (String, f64, Vec<(&'static str, f64)>);

/// The activities of `held` as one line: up to `max` sites (each with its
/// subclasses), shares of `weight`, those under 0.5% left out.
pub fn line(held: &RowHeld, weight: u64, max: usize) -> String {
    let total = weight as f64;
    let direct: std::collections::HashSet<u32> = held
        .activities
        .iter()
        .filter(|a| a.via.is_empty())
        .map(|a| a.tid)
        .collect();
    let several = direct.len() > 1;
    // Sites in order of weight, each with its subclasses, and where each
    // is (an edge of a large graph has thousands of activities).
    let mut sites: Vec<SiteMix> = Vec::new();
    let mut site_at: HashMap<String, usize> = HashMap::new();
    // A waker outside the recording is named by the row's waker line
    // already; there is nothing to say about what it did.
    for a in held.activities.iter().filter(|a| a.state != "unrecorded") {
        let name = format!("{}{}", who(a, several), what(a));
        let i = *site_at.entry(name).or_insert_with_key(|name| {
            sites.push((name.clone(), 0.0, Vec::new()));
            sites.len() - 1
        });
        let s = &mut sites[i];
        s.1 += a.samples;
        match s.2.iter_mut().find(|(t, _)| *t == a.tag()) {
            Some(c) => c.1 += a.samples,
            None => s.2.push((a.tag(), a.samples)),
        }
    }
    sites.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    sites
        .iter()
        .filter(|s| pct(s.1, total) >= 0.5)
        .take(max)
        .map(|(name, _, classes)| {
            let mut classes = classes.clone();
            classes.sort_by(|a, b| b.1.total_cmp(&a.1));
            let mix: Vec<String> = classes
                .iter()
                .filter(|c| pct(c.1, total) >= 0.5)
                .map(|(tag, n)| format!("{tag} {:.0}%", pct(*n, total)))
                .collect();
            format!("{name} {}", mix.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Where the wakers were when they woke the row's waits: up to `max`
/// sites, shares of `weight`, those under 0.5% left out.
pub fn woken_at(held: &RowHeld, weight: u64, max: usize) -> String {
    let total = weight as f64;
    held.woken_at
        .iter()
        .filter(|w| pct(w.samples, total) >= 0.5)
        .take(max)
        .map(|w| format!("{} {:.0}%", w.site, pct(w.samples, total)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Write the lines under a blocked row, if other threads ended its waits:
/// what they did meanwhile, and where they were at the wakeups.
pub fn write(out: &mut impl Write, r: &Row, pad: &str, max: usize) -> io::Result<()> {
    let Some(held) = &r.while_held else {
        return Ok(());
    };
    let text = line(held, r.weight, max);
    if !text.is_empty() {
        writeln!(out, "{pad}{}: {text}", lead(r.lock_kind))?;
    }
    let at = woken_at(held, r.weight, max.min(2));
    if !at.is_empty() {
        writeln!(out, "{pad}woken at: {at}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_analysis::holder::Via;
    use holdup_trace::Class;

    fn act(thread: &str, via: &[&str], class: Class, site: &str, samples: f64) -> Activity {
        Activity {
            thread: thread.into(),
            tid: thread.rsplit(':').next().unwrap().parse().unwrap(),
            via: via
                .iter()
                .map(|v| Via {
                    thread: v.to_string(),
                    tid: 1,
                    class: Class::Other,
                })
                .collect(),
            class,
            state: if class == Class::Cpu {
                "cpu"
            } else {
                "interrupt"
            },
            woken_by: None,
            site: Some(site.into()),
            samples,
        }
    }

    #[test]
    fn sites_come_with_their_subclasses_and_chains_with_their_threads() {
        let held = RowHeld {
            samples: 100.0,
            activities: vec![
                act(
                    "keeper:2",
                    &[],
                    Class::Io,
                    "sync_under_lock → fdatasync",
                    55.0,
                ),
                act(
                    "keeper:2",
                    &[],
                    Class::Sched,
                    "sync_under_lock → fdatasync",
                    38.0,
                ),
                act("keeper:2", &[], Class::Cpu, "sync_under_lock → write", 6.8),
                act("keeper:2", &[], Class::Cpu, "tiny", 0.2),
            ],
            woken_at: vec![],
        };
        assert_eq!(
            line(&held, 100, 3),
            "sync_under_lock → fdatasync [I] 55%, [S] 38%; sync_under_lock → write [.] 7%"
        );
        let chained = RowHeld {
            samples: 10.0,
            activities: vec![
                act(
                    "feeder:3",
                    &["relay:2"],
                    Class::Io,
                    "read_block → pread64",
                    5.0,
                ),
                act("relay:2", &[], Class::Cpu, "relay", 3.0),
                act("other:4", &[], Class::Cpu, "spin", 2.0),
            ],
            woken_at: vec![],
        };
        assert_eq!(
            line(&chained, 10, 2),
            "feeder:3 via relay:2 [B]: read_block → pread64 [I] 50%; relay:2: relay [.] 30%"
        );
        assert_eq!(lead(Some(LockKind::Signal)), "until signalled");
        // A waker outside the recording: nothing to say beyond its name.
        let mut outside = act("tid:9", &[], Class::Other, "", 10.0);
        outside.state = "unrecorded";
        outside.site = None;
        let held = RowHeld {
            samples: 10.0,
            activities: vec![outside],
            woken_at: vec![],
        };
        assert_eq!(line(&held, 10, 3), "");
    }

    #[test]
    fn the_wakeup_sites_come_with_their_shares() {
        let at = |site: &str, samples| holdup_analysis::holder::WokenAt {
            site: site.into(),
            stack: String::new(),
            samples,
        };
        let held = RowHeld {
            samples: 100.0,
            activities: vec![],
            woken_at: vec![
                at("keeper → pthread_mutex_unlock", 90.0),
                at("keeper → cleanup → pthread_mutex_unlock", 9.8),
                at("rare", 0.2),
            ],
        };
        assert_eq!(
            woken_at(&held, 100, 3),
            "keeper → pthread_mutex_unlock 90%; keeper → cleanup → pthread_mutex_unlock 10%"
        );
        assert_eq!(woken_at(&held, 100, 1), "keeper → pthread_mutex_unlock 90%");
    }
}
