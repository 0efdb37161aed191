//! Block devices by name, in one place: a device number as the recorder
//! packs it (`major << 20 | minor`, the kernel's own `dev_t`) becomes the
//! name this machine gives it (`vda`), read from `/sys/dev/block`.
//!
//! A trace keeps device numbers only; they name the same disks on the
//! machine that recorded it, so a reader asks for names only when the
//! trace's host is this one.

use crate::Header;
use std::collections::HashMap;

/// The major and minor numbers of device number `dev`.
pub fn major_minor(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & 0xfffff)
}

/// The name of this machine's block device `dev`, if it has one.
pub fn block_name(dev: u32) -> Option<String> {
    let (major, minor) = major_minor(dev);
    devname(&std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?)
}

/// Every block device of this machine, by device number.
pub fn block_devices() -> HashMap<u32, String> {
    let mut names = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/sys/dev/block") else {
        return names;
    };
    for ent in dir.flatten() {
        let name = ent.file_name().to_string_lossy().to_string();
        let Some((ma, mi)) = name.split_once(':') else {
            continue;
        };
        let (Ok(ma), Ok(mi)) = (ma.parse::<u32>(), mi.parse::<u32>()) else {
            continue;
        };
        let uevent = std::fs::read_to_string(ent.path().join("uevent")).unwrap_or_default();
        if let Some(dev) = devname(&uevent) {
            names.insert(ma << 20 | mi, dev);
        }
    }
    names
}

/// The block devices of the trace with header `header`: this machine's,
/// when it recorded the trace; none otherwise (its numbers may name other
/// disks here).
pub fn block_devices_of(header: &Header) -> HashMap<u32, String> {
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    if header.hostname.is_empty() || here.trim() != header.hostname {
        return HashMap::new();
    }
    block_devices()
}

fn devname(uevent: &str) -> Option<String> {
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_device_and_all_devices_name_alike() {
        assert_eq!(major_minor(254 << 20 | 3), (254, 3));
        let all = block_devices();
        for (&dev, name) in &all {
            assert_eq!(block_name(dev).as_deref(), Some(name.as_str()));
        }
        assert_eq!(block_name(0xfff << 20 | 0xfffff), None);
    }

    #[test]
    fn a_trace_from_another_host_gets_no_names() {
        let other = Header {
            hostname: "not-this-host-\u{1}".into(),
            ..Default::default()
        };
        assert!(block_devices_of(&other).is_empty());
        assert!(block_devices_of(&Header::default()).is_empty());
    }
}
