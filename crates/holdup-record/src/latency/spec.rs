//! The user functions `--func` names: `[BINARY:]FUNCTION` (a C++ or Rust
//! name without parameters answers for every overload), or
//! `[BINARY:]FILE:LINE` for the function whose code holds that line; the
//! binary is the command's (or the `-p` process's) executable by default.

use anyhow::{bail, Context};
use holdup_bpf::latency::{UfuncRole, UserFunc};
use std::path::PathBuf;

/// `--func` arguments as (binary, symbol), and the operations of each
/// `--func` that several functions answer to (its overloads: one of them
/// called is enough).
pub fn user_funcs(
    funcs: &[String],
    command: &[String],
    pids: &[u32],
    callees: usize,
) -> anyhow::Result<(Vec<UserFunc>, Vec<Vec<String>>)> {
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
    let role = if callees > 0 {
        UfuncRole::Root
    } else {
        UfuncRole::Operation
    };
    let (mut out, mut overloads) = (Vec::new(), Vec::new());
    for f in funcs {
        let (binary, symbols) = func_spec(f, &default_binary)?;
        if symbols.len() > 1 {
            let readable: Vec<String> = symbols
                .iter()
                .map(|s| holdup_coz::names::readable(s))
                .collect();
            eprintln!(
                "holdup latency: --func {f}: {} functions answer to it (overloads or instantiations), each timed: {}",
                symbols.len(),
                readable.join("; ")
            );
            overloads.push(symbols.iter().map(|s| format!("func:{s}")).collect());
        }
        out.extend(symbols.into_iter().map(|symbol| UserFunc {
            binary: binary.clone(),
            symbol,
            role,
        }));
    }
    Ok((out, overloads))
}

/// One `--func`: `[BINARY:]FUNCTION`, or `[BINARY:]FILE:LINE` for the
/// function whose code holds that line; as (binary, symbols): a C++ or
/// Rust name without parameters may answer for several functions.
fn func_spec(
    f: &str,
    default_binary: &dyn Fn() -> anyhow::Result<PathBuf>,
) -> anyhow::Result<(PathBuf, Vec<String>)> {
    use holdup_coz::names::{is_file_line, split_binary};
    // BINARY:FILE:LINE, BINARY:FUNCTION; a FILE:LINE alone has one colon,
    // and the `::` of a C++ or Rust name splits nothing.
    let (binary, what) = match split_binary(f, |head| {
        !is_file_line(f) || is_file_line(&f[head.len() + 1..])
    }) {
        Some((bin, rest)) => (PathBuf::from(bin), rest),
        None => (default_binary()?, f),
    };
    if what.is_empty() {
        bail!("--func '{f}': no symbol given");
    }
    if !binary.is_file() {
        bail!("--func '{f}': no such file {}", binary.display());
    }
    let symbols = if is_file_line(what) {
        vec![holdup_coz::probe::function_at(&binary, what)
            .map_err(|e| anyhow::anyhow!("--func {e}"))?]
    } else {
        holdup_coz::probe::functions_named(&binary, what)
            .map_err(|e| anyhow::anyhow!("--func {e}"))?
    };
    Ok((binary, symbols))
}
