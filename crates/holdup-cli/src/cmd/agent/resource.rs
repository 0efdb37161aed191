//! What a profile says of its process, from /proc while it runs: its
//! executable, command line and cgroup, and the container and Kubernetes
//! pod its cgroup path names (as container runtimes and the kubelet name
//! their cgroups: `docker-<id>.scope`, `cri-containerd-<id>.scope`,
//! `crio-<id>.scope`, `libpod-<id>.scope`, `/docker/<id>`,
//! `/kubepods/<qos>/pod<uid>/<id>`, `kubepods-<qos>-pod<uid>.slice`, …).

use holdup_render::export::otlp::{Attributes, Value};
use holdup_trace::Trace;
use std::collections::HashMap;

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The container id a cgroup path ends in: 64 hex digits, after the
/// runtime's prefix and before `.scope`, optionally followed by one
/// lower-case component (`/init`, `/container`). The runtimes' monitors
/// (`…-conmon-<id>.scope`) are not the container.
pub fn container_id(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() > 1
        && parts
            .last()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_lowercase()))
    {
        parts.pop();
    }
    let last = parts.last()?.trim_end_matches(".scope");
    if last.contains("conmon") {
        return None;
    }
    let id = last.rsplit(['-', ':']).next()?;
    (id.len() == 64 && is_hex(id)).then(|| id.to_string())
}

/// The pod uid a cgroup path names: `pod<uid>` (cgroupfs driver, dashes)
/// or `…-pod<uid>.slice` (systemd driver, underscores for dashes).
pub fn pod_uid(path: &str) -> Option<String> {
    path.split('/').find_map(|part| {
        let part = part.trim_end_matches(".slice");
        let uid = match part.strip_prefix("pod") {
            Some(u) => u,
            None => &part[part.find("-pod")? + 4..],
        };
        let uid = uid.replace('_', "-");
        let uuid = uid.len() == 36
            && uid.split('-').map(str::len).eq([8, 4, 4, 4, 12])
            && is_hex(&uid.replace('-', ""));
        // Static pods are named by a hash.
        let hash = uid.len() == 32 && is_hex(&uid);
        (uuid || hash).then_some(uid)
    })
}

/// The paths of /proc/PID/cgroup's lines (after `hierarchy:controllers:`).
fn cgroup_paths(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|l| l.splitn(3, ':').nth(2))
}

/// Attributes of a cgroup file's contents.
pub fn cgroup_attributes(text: &str) -> Attributes {
    let mut out = Attributes::new();
    let text = text.trim();
    if text.is_empty() {
        return out;
    }
    out.push(("process.linux.cgroup".into(), Value::Str(text.to_string())));
    if let Some(id) = cgroup_paths(text).find_map(container_id) {
        out.push(("container.id".into(), Value::Str(id)));
    }
    if let Some(uid) = cgroup_paths(text).find_map(pod_uid) {
        out.push(("k8s.pod.uid".into(), Value::Str(uid)));
    }
    out
}

/// A running process's attributes; none if it is gone.
fn from_proc(pid: u32) -> Option<Attributes> {
    let dir = format!("/proc/{pid}");
    let mut out = Attributes::new();
    if let Ok(exe) = std::fs::read_link(format!("{dir}/exe")) {
        let path = exe.to_string_lossy();
        let path = path.trim_end_matches(" (deleted)");
        let name = path.rsplit('/').next().unwrap_or(path);
        out.push((
            "process.executable.name".into(),
            Value::Str(name.to_string()),
        ));
        out.push((
            "process.executable.path".into(),
            Value::Str(path.to_string()),
        ));
    }
    let cmdline = std::fs::read(format!("{dir}/cmdline")).ok()?;
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if !args.is_empty() {
        out.push(("process.command_line".into(), Value::Str(args.join(" "))));
    }
    if let Ok(text) = std::fs::read_to_string(format!("{dir}/cgroup")) {
        out.extend(cgroup_attributes(&text));
    }
    Some(out)
}

/// What the trace knows of a process that is gone: the program its main
/// thread ran.
fn from_trace(trace: &Trace, pid: u32) -> Attributes {
    let main = trace.threads.get(&pid);
    match main.and_then(|t| t.exec.clone()) {
        Some(path) => vec![
            (
                "process.executable.name".into(),
                Value::Str(path.rsplit('/').next().unwrap_or(&path).to_string()),
            ),
            ("process.executable.path".into(), Value::Str(path)),
        ],
        None => Vec::new(),
    }
}

/// What a trace file says of its processes (for `holdup export --format
/// otlp`: the machine may be another, the processes gone).
pub fn processes_of_trace(trace: &Trace) -> HashMap<u32, Attributes> {
    trace
        .threads
        .values()
        .filter(|t| t.pid == t.tid)
        .map(|t| (t.pid, from_trace(trace, t.pid)))
        .collect()
}

/// Attributes per process, read once per process and forgotten when it is
/// no longer in the trace. A process is known by pid and start time, so a
/// reused pid is read anew.
#[derive(Default)]
pub struct Processes {
    known: HashMap<u32, (u64, Attributes)>,
}

impl Processes {
    /// The attributes of `pids`, as the caller of the encoder wants them.
    pub fn of(&mut self, trace: &Trace, pids: &[u32]) -> HashMap<u32, Attributes> {
        self.known.retain(|pid, _| trace.threads.contains_key(pid));
        pids.iter()
            .map(|&pid| {
                let started = trace.threads.get(&pid).map_or(0, |t| t.start);
                let fresh = self
                    .known
                    .get(&pid)
                    .is_none_or(|(start, _)| *start != started);
                if fresh {
                    let attrs = from_proc(pid).unwrap_or_else(|| from_trace(trace, pid));
                    self.known.insert(pid, (started, attrs));
                }
                (pid, self.known[&pid].1.clone())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "b4d6d161c62525d726fa394b27df30e14f8ea5646313ada576b390de70cfc8cc";

    #[test]
    fn container_ids_of_the_runtimes_cgroup_names() {
        for path in [
            format!("/system.slice/docker-{ID}.scope"),
            format!("/system.slice/docker-{ID}.scope/init"),
            format!("/docker/{ID}"),
            format!("/machine.slice/libpod-{ID}.scope/container"),
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/cri-containerd-{ID}.scope"),
            format!("/kubepods/besteffort/podf6f2d169-f2ae-4afa-95ed-06ff2ed6b288/{ID}"),
            format!("/kubepods/burstable/pod1/crio-{ID}"),
            format!("/system.slice/containerd.service/kubepods-besteffort-pod1.slice:cri-containerd:{ID}"),
        ] {
            assert_eq!(container_id(&path).as_deref(), Some(ID), "{path}");
        }
        for path in [
            "/".to_string(),
            "/user.slice/user-1000.slice/session-3.scope".into(),
            "/user.slice/vte-spawn-f6f2d169-f2ae-4afa-95ed-06ff2ed6b288.scope".into(),
            format!("/machine.slice/libpod-conmon-{ID}.scope"),
            format!("/docker/{}", &ID[..63]),
        ] {
            assert_eq!(container_id(&path), None, "{path}");
        }
    }

    #[test]
    fn pod_uids_of_both_cgroup_drivers() {
        let uid = "f6f2d169-f2ae-4afa-95ed-06ff2ed6b288";
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope",
            uid.replace('-', "_")
        );
        assert_eq!(pod_uid(&systemd).as_deref(), Some(uid));
        let guaranteed = format!(
            "/kubepods.slice/kubepods-pod{}.slice/x",
            uid.replace('-', "_")
        );
        assert_eq!(pod_uid(&guaranteed).as_deref(), Some(uid));
        assert_eq!(
            pod_uid(&format!("/kubepods/besteffort/pod{uid}/{ID}")).as_deref(),
            Some(uid)
        );
        assert_eq!(pod_uid(&format!("/system.slice/docker-{ID}.scope")), None);
        assert_eq!(pod_uid("/user.slice/podman.slice"), None);
    }

    #[test]
    fn a_cgroup_file_gives_the_cgroup_container_and_pod() {
        let text = format!("0::/kubepods/burstable/podf6f2d169-f2ae-4afa-95ed-06ff2ed6b288/{ID}\n");
        let attrs = cgroup_attributes(&text);
        let get = |k: &str| {
            attrs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            get("process.linux.cgroup"),
            Some(Value::Str(text.trim().to_string()))
        );
        assert_eq!(get("container.id"), Some(Value::Str(ID.into())));
        assert_eq!(
            get("k8s.pod.uid"),
            Some(Value::Str("f6f2d169-f2ae-4afa-95ed-06ff2ed6b288".into()))
        );
        assert!(cgroup_attributes("0::/\n")
            .iter()
            .all(|(k, _)| k == "process.linux.cgroup"));
    }
}
