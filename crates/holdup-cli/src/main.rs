//! The `holdup` command: one module per subcommand under `cmd/`.

mod cli;
mod cmd;
#[cfg(test)]
mod doc_checks;
mod output;
mod upload;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::run(cli) {
        Ok(code) => code,
        // The reader of our output went away (`holdup report | head`): the
        // output it wanted was written; say nothing, like other filters.
        Err(err)
            if err.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("holdup: error: {}", one_line(&err));
            ExitCode::from(2)
        }
    }
}

/// One line a user can act on: the cause chain joined, not dumped. A cause
/// that its error already shows in its message (an io error in "path:
/// error") is not said twice.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut msg = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !msg.contains(&cause) {
            msg.push_str(": ");
            msg.push_str(&cause);
        }
    }
    msg
}
