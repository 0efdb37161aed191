//! `holdup push`: send a recorded trace's profile to Pyroscope or Parca.

use crate::upload::{self, PushArgs};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace file to push.
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// The server, as http://HOST:PORT or https://… (Pyroscope listens on
    /// 4040, Parca on 7070).
    #[arg(long, value_name = "URL")]
    pub url: String,
    #[command(flatten)]
    pub to: PushArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let to = upload::Endpoint::new(&a.url, &a.to.connect).map_err(|e| upload::redacted(e, None))?;
    upload::push(&a.input, &to, &a.to)?;
    Ok(ExitCode::SUCCESS)
}
