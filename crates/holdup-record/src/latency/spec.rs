//! The user functions `--func` names: `[BINARY:]FUNCTION` (a C++ or Rust
//! name without parameters answers for every overload), or
//! `[BINARY:]FILE:LINE` for the function whose code holds that line; the
//! binary is the command's (or the `-p` process's) executable by default.

use anyhow::{bail, Context};
use holdup_bpf::latency::{UfuncRole, UserFunc};
use std::collections::BTreeMap;
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
    let default_binary = || default_binary(command, pids, "--func");
    let role = if callees > 0 {
        UfuncRole::Root
    } else {
        UfuncRole::Operation
    };
    let (mut out, mut overloads) = (Vec::new(), Vec::new());
    for f in funcs {
        let (binary, symbols) = func_spec(f, &default_binary, "--func")?;
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
            offset: None,
        }));
    }
    Ok((out, overloads))
}

/// The executable of the command, or of the first `-p` process: where a
/// function named without its binary is looked up.
fn default_binary(command: &[String], pids: &[u32], option: &str) -> anyhow::Result<PathBuf> {
    if let Some(argv0) = command.first() {
        return crate::launch::resolve_program(argv0)
            .with_context(|| format!("cannot find program '{argv0}'"));
    }
    if let Some(pid) = pids.first() {
        return std::fs::read_link(format!("/proc/{pid}/exe"))
            .with_context(|| format!("cannot read the executable of pid {pid}"));
    }
    bail!("{option} SYMBOL needs a command or -p PID to find it in; with -a give BINARY:SYMBOL")
}

/// The functions one spec of `option` (another command's, as `record
/// --trigger-latency`) names, each an operation of its own, placed in
/// their files.
pub fn operation_funcs(
    spec: &str,
    command: &[String],
    pids: &[u32],
    option: &str,
) -> anyhow::Result<Vec<UserFunc>> {
    let (binary, symbols) = func_spec(spec, &|| default_binary(command, pids, option), option)?;
    let mut funcs: Vec<UserFunc> = symbols
        .into_iter()
        .map(|symbol| UserFunc {
            binary: binary.clone(),
            symbol,
            role: UfuncRole::Operation,
            offset: None,
        })
        .collect();
    place(&mut funcs)?;
    Ok(funcs)
}

/// One `--func` (or `option`): `[BINARY:]FUNCTION`, or `[BINARY:]FILE:LINE`
/// for the function whose code holds that line; as (binary, symbols): a
/// C++ or Rust name without parameters may answer for several functions.
fn func_spec(
    f: &str,
    default_binary: &dyn Fn() -> anyhow::Result<PathBuf>,
    option: &str,
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
        bail!("{option} '{f}': no symbol given");
    }
    if !binary.is_file() {
        bail!("{option} '{f}': no such file {}", binary.display());
    }
    let symbols = if is_file_line(what) {
        vec![holdup_coz::probe::function_at(&binary, what)
            .map_err(|e| anyhow::anyhow!("{option} {e}"))?]
    } else {
        holdup_coz::probe::functions_named(&binary, what)
            .map_err(|e| anyhow::anyhow!("{option} {e}"))?
    };
    Ok((binary, symbols))
}

/// Where each of `funcs` starts in its file, found as the specs were (in
/// the symbol tables, or in the debug file of a stripped binary, which the
/// kernel cannot look in: it takes an offset). Says which of them the
/// kernel single-steps the first instruction of: that step comes after the
/// entry probe's time stamp, so it counts in each of their calls (about
/// 19 µs on a test VM, more in a process's first calls).
pub fn place(funcs: &mut [UserFunc]) -> anyhow::Result<()> {
    // Each binary is read once: --callees can time dozens of its functions.
    let mut by_binary: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    for (i, f) in funcs.iter().enumerate() {
        by_binary.entry(f.binary.clone()).or_default().push(i);
    }
    let mut stepped = Vec::new();
    for (binary, indices) in by_binary {
        let symbols: Vec<&str> = indices.iter().map(|&i| funcs[i].symbol.as_str()).collect();
        let sites = holdup_coz::probe::sites_of(&binary, &symbols).map_err(anyhow::Error::msg)?;
        for (i, site) in indices.into_iter().zip(sites) {
            let f = &mut funcs[i];
            let site = site.ok_or_else(|| {
                anyhow::anyhow!(
                    "function '{}' not found in {} (no such symbol: misspelled, or the binary is stripped)",
                    f.symbol,
                    binary.display()
                )
            })?;
            if site.single_stepped {
                stepped.push(f.symbol.clone());
            }
            f.offset = Some(site.offset);
        }
    }
    if !stepped.is_empty() {
        eprintln!(
            "holdup: note: the kernel single-steps the first instruction of {} (it emulates only pushes, nops, calls and jumps): each call's time includes that trap (~20 µs on some virtual machines)",
            stepped.join(", ")
        );
    }
    Ok(())
}
