//! The user functions `--func` names: `[BINARY:]SYMBOL`, or
//! `[BINARY:]FILE:LINE` for the function whose code holds that line; the
//! binary is the command's (or the `-p` process's) executable by default.

use anyhow::{bail, Context};
use holdup_bpf::latency::{UfuncRole, UserFunc};
use std::path::PathBuf;

/// `--func` arguments as (binary, symbol).
pub fn user_funcs(
    funcs: &[String],
    command: &[String],
    pids: &[u32],
    callees: usize,
) -> anyhow::Result<Vec<UserFunc>> {
    let default_binary = || -> anyhow::Result<PathBuf> {
        if let Some(argv0) = command.first() {
            return crate::launch::resolve_program(argv0)
                .with_context(|| format!("cannot find program '{argv0}'"));
        }
        if let Some(pid) = pids.first() {
            return std::fs::read_link(format!("/proc/{pid}/exe"))
                .with_context(|| format!("cannot read the executable of pid {pid}"));
        }
        bail!("--func SYMBOL needs a command or -p PID to find it in; with -a give BINARY:SYMBOL")
    };
    funcs
        .iter()
        .map(|f| {
            let (binary, symbol) = func_spec(f, &default_binary)?;
            Ok(UserFunc {
                binary,
                symbol,
                role: if callees > 0 {
                    UfuncRole::Root
                } else {
                    UfuncRole::Operation
                },
            })
        })
        .collect()
}

/// One `--func`: `[BINARY:]SYMBOL`, or `[BINARY:]FILE:LINE` for the
/// function whose code holds that line; as (binary, symbol).
fn func_spec(
    f: &str,
    default_binary: &dyn Fn() -> anyhow::Result<PathBuf>,
) -> anyhow::Result<(PathBuf, String)> {
    let is_line = f
        .rsplit_once(':')
        .is_some_and(|(head, n)| !head.is_empty() && n.parse::<u32>().is_ok());
    let (binary, what) = match f.split_once(':') {
        // BINARY:FILE:LINE, BINARY:SYMBOL; a FILE:LINE alone has one colon.
        Some((bin, rest)) if !bin.is_empty() && (!is_line || rest.contains(':')) => {
            (PathBuf::from(bin), rest)
        }
        _ => (default_binary()?, f),
    };
    if what.is_empty() {
        bail!("--func '{f}': no symbol given");
    }
    if !binary.is_file() {
        bail!("--func '{f}': no such file {}", binary.display());
    }
    let symbol = if is_line {
        holdup_coz::probe::function_at(&binary, what).map_err(|e| anyhow::anyhow!("--func {e}"))?
    } else {
        what.to_string()
    };
    Ok((binary, symbol))
}
