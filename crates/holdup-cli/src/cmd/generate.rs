//! `holdup completions SHELL` and the hidden `holdup man DIR`: shell
//! completions and man pages, both made from the clap definition in
//! `cli.rs`, so that they name exactly the flags the binary takes.

use crate::cli::Cli;
use anyhow::Context;
use clap::CommandFactory;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// Shell to complete for. Install, e.g.: `holdup completions bash >
    /// /etc/bash_completion.d/holdup`, `holdup completions zsh >
    /// ~/.zfunc/_holdup`, `holdup completions fish >
    /// ~/.config/fish/completions/holdup.fish`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Directory to write the pages into (`holdup.1`, `holdup-record.1`,
    /// `holdup-causal-run.1`, …); it must exist.
    pub dir: PathBuf,
}

pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "holdup", &mut out);
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    if !args.dir.is_dir() {
        anyhow::bail!("{}: not a directory", args.dir.display());
    }
    let pages = man_pages()?;
    for (name, page) in &pages {
        let path = args.dir.join(name);
        let mut out = crate::output::create(&path)?;
        out.write_all(page)
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    eprintln!(
        "holdup: wrote {} man pages to {}",
        pages.len(),
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Every man page, as (file name, roff text): one for `holdup` and one for
/// each visible subcommand, nested ones included (`holdup-causal-run.1`).
pub fn man_pages() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Building fills in the display names (`holdup-causal-run`) that name
    // the nested pages.
    cmd.build();
    let mut pages = Vec::new();
    add_pages(cmd, &mut pages)?;
    pages.sort();
    Ok(pages)
}

fn add_pages(cmd: clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        add_pages(sub.clone(), pages)?;
    }
    let man = clap_mangen::Man::new(cmd);
    let mut page = Vec::new();
    man.render(&mut page).context("cannot render a man page")?;
    pages.push((man.get_filename(), page));
    Ok(())
}
