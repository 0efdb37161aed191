//! Where a subcommand's `-o` output goes: `-` is standard output, any other
//! path a file created by [`holdup_trace::create_private`] (owner-only, no
//! symlink or other user's file written through).

use anyhow::Context;
use std::io::Write;
use std::path::Path;

fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// A writer for `path`; say [`done`] when it is written.
pub fn create(path: &Path) -> anyhow::Result<Box<dyn Write>> {
    if is_stdout(path) {
        return Ok(Box::new(std::io::stdout().lock()));
    }
    let file = holdup_trace::create_private(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Box::new(std::io::BufWriter::new(file)))
}

/// Flush `out` and say where it went (not for standard output, which the
/// reader sees).
pub fn done(path: &Path, mut out: Box<dyn Write>) -> anyhow::Result<()> {
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    if !is_stdout(path) {
        eprintln!("holdup: wrote {}", path.display());
    }
    Ok(())
}

/// Write `bytes` to `path` whole.
pub fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = create(path)?;
    out.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    done(path, out)
}
