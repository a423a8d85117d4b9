//! Host facts (CPUs allowed, CPU quota, load, CPU pressure), scheduler identity and MPS.
//!
//! A co-located GPU worker also shares the host's CPUs: a throttled cgroup or a loaded node slows
//! the launch of device work and shows up as GPU "interference". These facts, taken at the
//! window's start and end, let the summarizer tell the two apart.

use std::path::Path;

use coload_cohort_schema::{HostInfo, Identity};

/// Host facts at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostSnapshot {
    /// CPUs in this process's affinity mask (`sched_getaffinity`).
    pub cpus_allowed: Option<u32>,
    /// cgroup CPU quota in CPUs (`cpu.max` quota / period), `None` when unlimited or unknown.
    pub cpu_quota: Option<f64>,
    /// One-minute load average (`/proc/loadavg`).
    pub loadavg_1m: Option<f64>,
    /// PSI `cpu some avg10`, percent (`/proc/pressure/cpu`).
    pub psi_cpu_some_avg10: Option<f64>,
}

/// Takes a snapshot of the host. Reads a few small files; call it outside the window.
#[must_use]
pub fn host_snapshot() -> HostSnapshot {
    HostSnapshot {
        cpus_allowed: cpus_allowed(),
        cpu_quota: cpu_quota(Path::new("/")),
        loadavg_1m: read("/proc/loadavg").and_then(|s| parse_loadavg(&s)),
        psi_cpu_some_avg10: read("/proc/pressure/cpu").and_then(|s| parse_psi_some_avg10(&s)),
    }
}

/// `worker.json`'s `host` from snapshots taken at the window's start and end (CPUs and quota
/// from the start).
#[must_use]
pub fn host_info(start: &HostSnapshot, end: &HostSnapshot) -> HostInfo {
    HostInfo {
        cpus_allowed: start.cpus_allowed,
        cpu_quota: start.cpu_quota,
        psi_cpu_some_avg10_start: start.psi_cpu_some_avg10,
        psi_cpu_some_avg10_end: end.psi_cpu_some_avg10,
        loadavg_start: start.loadavg_1m,
        loadavg_end: end.loadavg_1m,
    }
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn cpus_allowed() -> Option<u32> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    let n = (0..nix::sched::CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .count();
    Some(n as u32)
}

/// The CPU quota of this process's cgroup, looking under `root` (`/` outside tests): cgroup v2
/// `cpu.max` of the process's own cgroup, then of the namespace root (a container sees its
/// own cgroup there), then cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
fn cpu_quota(root: &Path) -> Option<f64> {
    let fs = root.join("sys/fs/cgroup");
    let own = read(root.join("proc/self/cgroup"))
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        })
        .map(|p| fs.join(p.trim_start_matches('/')).join("cpu.max"));
    for path in own.into_iter().chain([fs.join("cpu.max")]) {
        if let Some(text) = read(&path) {
            return parse_cpu_max(&text);
        }
    }
    let quota = read(fs.join("cpu/cpu.cfs_quota_us"))?;
    let period = read(fs.join("cpu/cpu.cfs_period_us"))?;
    parse_cfs(&quota, &period)
}

/// `cpu.max`: `"max 100000"` (unlimited) or `"<quota> <period>"` microseconds.
fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let quota = it.next()?;
    let period: f64 = it.next().map_or(Some(100_000.0), |p| p.parse().ok())?;
    if quota == "max" || period <= 0.0 {
        return None;
    }
    Some(quota.parse::<f64>().ok()? / period)
}

/// cgroup v1: a quota of `-1` means unlimited.
fn parse_cfs(quota: &str, period: &str) -> Option<f64> {
    let q: f64 = quota.trim().parse().ok()?;
    let p: f64 = period.trim().parse().ok()?;
    (q > 0.0 && p > 0.0).then(|| q / p)
}

fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// `/proc/pressure/cpu`: `some avg10=1.23 avg60=... total=...` (and a `full` line).
fn parse_psi_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// The environment variables [`scheduler_identity`] reads, and nothing else:
/// `NODE_NAME` (Kubernetes node, from the downward API), `POD_NAME`, `POD_UID` (downward API)
/// and `POLYAXON_RUN_UUID` (set by Polyaxon in every run). No other variable is copied.
pub const IDENTITY_VARIABLES: [&str; 4] = ["NODE_NAME", "POD_NAME", "POD_UID", "POLYAXON_RUN_UUID"];

/// Who and where this worker is: the host name, and the scheduler's identity from
/// [`IDENTITY_VARIABLES`]. `node_name` (`--node-name`) wins over `NODE_NAME`.
#[must_use]
pub fn scheduler_identity(node_name: Option<String>) -> Identity {
    identity_from(node_name, |name| std::env::var(name).ok())
}

fn identity_from(node_name: Option<String>, var: impl Fn(&str) -> Option<String>) -> Identity {
    let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    Identity {
        hostname: nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default(),
        node_name: node_name
            .filter(|n| !n.trim().is_empty())
            .or_else(|| get("NODE_NAME")),
        pod_name: get("POD_NAME"),
        pod_uid: get("POD_UID"),
        run_uuid: get("POLYAXON_RUN_UUID"),
        pid: std::process::id(),
    }
}

/// The pipe directory an MPS client uses when `CUDA_MPS_PIPE_DIRECTORY` is unset.
pub const DEFAULT_MPS_PIPE_DIRECTORY: &str = "/tmp/nvidia-mps";

/// Whether this process will run as a CUDA MPS client: an MPS control daemon's `control` pipe
/// exists in `CUDA_MPS_PIPE_DIRECTORY` (or in `/tmp/nvidia-mps` when that is unset). The CUDA
/// driver connects to that daemon when the process creates its context. A stale pipe left by a
/// dead daemon reads as a client too; the allocation check's `not_an_mps_client` /
/// `unexpected_mps_client` warnings name which way the evidence went.
#[must_use]
pub fn mps_client() -> bool {
    let dir = std::env::var_os("CUDA_MPS_PIPE_DIRECTORY")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || DEFAULT_MPS_PIPE_DIRECTORY.into(),
            std::path::PathBuf::from,
        );
    mps_control_pipe_in(&dir)
}

/// The control endpoint is a Unix socket with the MPS shipped in driver 580 (seen on the H200
/// host: `pipe/control` and `pipe/control_privileged` are sockets) and a named pipe in older
/// releases; either counts.
fn mps_control_pipe_in(dir: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(dir.join("control")).is_ok_and(|m| {
        let t = m.file_type();
        t.is_socket() || t.is_fifo()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_parses_quota_and_unlimited() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("200000 100000\n"), Some(2.0));
        assert_eq!(parse_cpu_max("50000 100000"), Some(0.5));
        assert_eq!(parse_cpu_max("garbage"), None);
        assert_eq!(parse_cfs("-1\n", "100000\n"), None);
        assert_eq!(parse_cfs("150000\n", "100000\n"), Some(1.5));
    }

    #[test]
    fn cgroup_quota_is_read_from_the_process_cgroup_then_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("proc/self")).unwrap();
        std::fs::create_dir_all(root.join("sys/fs/cgroup/kubepods/pod1")).unwrap();
        std::fs::write(root.join("proc/self/cgroup"), "0::/kubepods/pod1\n").unwrap();
        std::fs::write(root.join("sys/fs/cgroup/cpu.max"), "max 100000\n").unwrap();
        assert_eq!(cpu_quota(root), None, "falls back to the unlimited root");
        std::fs::write(
            root.join("sys/fs/cgroup/kubepods/pod1/cpu.max"),
            "200000 100000\n",
        )
        .unwrap();
        assert_eq!(cpu_quota(root), Some(2.0));
        // cgroup v1 only.
        let v1 = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(v1.path().join("sys/fs/cgroup/cpu")).unwrap();
        std::fs::write(
            v1.path().join("sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
            "300000",
        )
        .unwrap();
        std::fs::write(
            v1.path().join("sys/fs/cgroup/cpu/cpu.cfs_period_us"),
            "100000",
        )
        .unwrap();
        assert_eq!(cpu_quota(v1.path()), Some(3.0));
    }

    #[test]
    fn psi_and_loadavg_parse() {
        let psi = "some avg10=1.25 avg60=0.50 avg300=0.10 total=123\n\
                   full avg10=9.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_psi_some_avg10(psi), Some(1.25));
        assert_eq!(parse_psi_some_avg10("full avg10=2.00\n"), None);
        assert_eq!(parse_loadavg("0.42 0.30 0.20 1/123 4567\n"), Some(0.42));
    }

    #[test]
    fn the_live_snapshot_sees_this_process() {
        let s = host_snapshot();
        let n = s.cpus_allowed.unwrap();
        assert!(n >= 1);
        assert!(s.loadavg_1m.unwrap() >= 0.0);
        let info = host_info(&s, &HostSnapshot::default());
        assert_eq!(info.cpus_allowed, Some(n));
        assert_eq!(info.loadavg_start, s.loadavg_1m);
        assert_eq!(info.loadavg_end, None);
    }

    #[test]
    fn identity_reads_only_the_named_variables() {
        let env = |name: &str| match name {
            "NODE_NAME" => Some("node-a".to_owned()),
            "POD_NAME" => Some("worker-3".to_owned()),
            "POD_UID" => Some(String::new()),
            "POLYAXON_RUN_UUID" => Some("abc".to_owned()),
            other => panic!("read an unlisted variable {other}"),
        };
        let id = identity_from(None, env);
        assert_eq!(id.node_name.as_deref(), Some("node-a"));
        assert_eq!(id.pod_name.as_deref(), Some("worker-3"));
        assert_eq!(id.pod_uid, None, "empty values are absent");
        assert_eq!(id.run_uuid.as_deref(), Some("abc"));
        assert_eq!(id.pid, std::process::id());
        assert!(!id.hostname.is_empty());
        let id = identity_from(Some("node-b".into()), env);
        assert_eq!(id.node_name.as_deref(), Some("node-b"));
    }

    #[test]
    fn an_mps_client_needs_a_control_socket_or_fifo() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!mps_control_pipe_in(dir.path()));
        std::fs::write(dir.path().join("control"), "").unwrap();
        assert!(!mps_control_pipe_in(dir.path()), "a plain file is no pipe");
        std::fs::remove_file(dir.path().join("control")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("control"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(mps_control_pipe_in(dir.path()));
        std::fs::remove_file(dir.path().join("control")).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("control")).unwrap();
        assert!(
            mps_control_pipe_in(dir.path()),
            "driver 580's MPS uses a socket"
        );
    }
}
