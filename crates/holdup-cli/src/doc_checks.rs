//! Checks that the documentation says what the binary does: every `holdup …`
//! line in a code block of the README or `docs/` parses with the CLI's own
//! definition, every verb has an example, every relative link leads to a
//! file (and heading), and the committed man pages are the ones the definition makes
//! (`HOLDUP_BLESS=1` rewrites them).

use crate::cli::Cli;
use clap::{CommandFactory, Parser};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Markdown file of the docs: its path, its name from the repository's
/// root, its text.
struct Doc {
    path: PathBuf,
    name: String,
    text: String,
}

/// README.md and every Markdown file under docs/, in a stable order.
fn docs() -> Vec<Doc> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![repo_root().join("README.md")];
    walk(&repo_root().join("docs"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| Doc {
            name: path
                .strip_prefix(repo_root())
                .unwrap()
                .display()
                .to_string(),
            text: std::fs::read_to_string(&path).unwrap(),
            path,
        })
        .collect()
}

/// The lines of fenced code blocks, with their line numbers; a line ending
/// in `\` is joined with the next.
fn code_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let (number, mut text) = pending.take().unwrap_or((i + 1, String::new()));
        text.push_str(line);
        match text.strip_suffix('\\') {
            Some(head) => pending = Some((number, head.to_string())),
            None => lines.push((number, text)),
        }
    }
    lines
}

/// Shell words of one line, as far as the docs use the shell: quotes, a
/// comment, `$(…)` (one word, standing for a number such as a PID), and the
/// separators `|`, `;`, `&&` (each a word of its own).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    word.push(q);
                }
            }
            '$' if chars.peek() == Some(&'(') => {
                let mut depth = 0;
                for q in chars.by_ref() {
                    depth += match q {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    if depth == 0 {
                        break;
                    }
                }
                word.push('1');
                in_word = true;
            }
            '#' if !in_word => break,
            '|' | ';' | '&' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                if c != '&' || chars.next_if_eq(&'&').is_some() {
                    words.push(if c == '&' { "&&".into() } else { c.to_string() });
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The argument lists of the `holdup` commands in a line: each command of
/// a pipeline or list, after its `NAME=VALUE` assignments and `sudo`, whose program is
/// `holdup` (or a path or variable ending in it); redirections left out.
fn holdup_commands(line: &str) -> Vec<Vec<String>> {
    let line = line.trim_start().trim_start_matches("$ ");
    let words = shell_words(line);
    let mut commands = Vec::new();
    for command in words.split(|w| matches!(w.as_str(), "|" | ";" | "&&")) {
        let mut words = command
            .iter()
            .skip_while(|w| (w.contains('=') && !w.starts_with('-')) || *w == "sudo")
            .peekable();
        let Some(program) = words.peek() else {
            continue;
        };
        if !(*program == "holdup" || program.ends_with("/holdup") || *program == "$holdup") {
            continue;
        }
        let mut args = Vec::new();
        let mut words = words.cloned();
        while let Some(w) = words.next() {
            if let Some(target) = w.strip_prefix('>').or(w.strip_prefix("2>")) {
                if target.is_empty() {
                    words.next();
                }
                continue;
            }
            args.push(w);
        }
        commands.push(args);
    }
    commands
}

/// Ok if clap takes `args` (asking for help or the version counts).
fn check(args: &[String]) -> Result<(), String> {
    match Cli::try_parse_from(args) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string().lines().next().unwrap_or_default().to_string()),
    }
}

/// Every documented command, as (where, arguments).
fn documented_commands() -> Vec<(String, Vec<String>)> {
    let mut all = Vec::new();
    for doc in docs() {
        for (number, line) in code_lines(&doc.text) {
            for args in holdup_commands(&line) {
                all.push((format!("{}:{number}", doc.name), args));
            }
        }
    }
    all
}

#[test]
fn every_documented_command_parses() {
    let commands = documented_commands();
    let failures: Vec<String> = commands
        .iter()
        .filter_map(|(place, args)| {
            check(args)
                .err()
                .map(|e| format!("{place}: `{}`: {e}", args.join(" ")))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The docs show about a hundred commands; finding few means the
    // extraction broke, not that the docs are right.
    assert!(
        commands.len() > 60,
        "only {} commands found",
        commands.len()
    );
}

#[test]
fn every_verb_has_an_example() {
    let commands = documented_commands();
    let missing: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .filter(|verb| !commands.iter().any(|(_, args)| args.get(1) == Some(verb)))
        .collect();
    assert!(missing.is_empty(), "no example of: {missing:?}");
}

#[test]
fn the_check_refuses_what_the_cli_refuses() {
    let line = "HOLDUP_X=1 sudo target/release/holdup report --no-such-flag | head -3";
    let commands = holdup_commands(line);
    assert_eq!(commands.len(), 1);
    assert_eq!(commands[0][..2], ["target/release/holdup", "report"]);
    assert!(check(&commands[0]).unwrap_err().contains("--no-such-flag"));
    assert!(check(&holdup_commands("holdup report --tid")[0]).is_err());
    assert!(check(&holdup_commands("holdup fly")[0]).is_err());
}

#[test]
fn shell_words_follow_the_shell() {
    let words = shell_words(r#"a 'b c' "d" $(pgrep -d, -x pg),2 x>y && e # f"#);
    assert_eq!(words, ["a", "b c", "d", "1,2", "x>y", "&&", "e"]);
    let commands = holdup_commands("holdup script > out.folded; holdup report -i a.data 2> log");
    assert_eq!(
        commands,
        [
            vec!["holdup", "script"],
            vec!["holdup", "report", "-i", "a.data"]
        ]
    );
    let lines = code_lines("text\n```sh\nholdup record \\\n  -o x -- ./a\n```\nholdup report\n");
    assert_eq!(lines, [(3, "holdup record   -o x -- ./a".to_string())]);
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut in_block = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if !in_block && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

#[test]
fn relative_links_lead_to_files_and_headings() {
    let mut broken = Vec::new();
    for doc in docs() {
        for target in doc
            .text
            .split("](")
            .skip(1)
            .filter_map(|s| s.split(')').next())
        {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let linked = if path.is_empty() {
                doc.path.clone()
            } else {
                doc.path.parent().unwrap().join(path)
            };
            let found = if !linked.exists() {
                false
            } else if fragment.is_empty() {
                true
            } else {
                let text = std::fs::read_to_string(&linked).unwrap_or_default();
                anchors(&text).iter().any(|a| a == fragment)
            };
            if !found {
                broken.push(format!("{}: {target}", doc.name));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor(" Several processes: `--system`"),
        "several-processes---system"
    );
    assert_eq!(
        anchor(" What the holder was doing"),
        "what-the-holder-was-doing"
    );
    assert_eq!(
        anchors("# A b\n```\n# not a heading\n```\n## C, d"),
        ["a-b", "c-d"]
    );
}

#[test]
fn committed_man_pages_are_current() {
    let dir = repo_root().join("docs/man");
    let pages = crate::cmd::generate::man_pages().unwrap();
    if std::env::var_os("HOLDUP_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, page) in &pages {
            std::fs::write(dir.join(name), page).unwrap();
        }
    }
    let mut committed: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    committed.sort();
    let made: Vec<&String> = pages.iter().map(|(name, _)| name).collect();
    assert_eq!(
        made,
        committed.iter().collect::<Vec<_>>(),
        "regenerate with HOLDUP_BLESS=1"
    );
    for (name, page) in &pages {
        let old = std::fs::read(dir.join(name)).unwrap();
        assert!(
            old == *page,
            "docs/man/{name} is out of date: regenerate with HOLDUP_BLESS=1 \
             cargo test --release -p holdup-cli --bin holdup committed_man_pages"
        );
    }
}

#[test]
fn completions_name_every_verb_and_flag() {
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "holdup", &mut script);
        let script = String::from_utf8(script).unwrap();
        for word in ["waitgraph", "critical-path", "callees-from", "subclass"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
}

#[test]
fn man_writes_every_page_into_a_directory_and_refuses_a_file() {
    use crate::cmd::generate::{man, man_pages, ManArgs};
    let dir = std::env::temp_dir().join(format!("holdup-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    man(ManArgs { dir: dir.clone() }).unwrap();
    for (name, page) in man_pages().unwrap() {
        assert_eq!(std::fs::read(dir.join(&name)).unwrap(), page, "{name}");
    }
    let file = dir.join("holdup.1");
    let err = man(ManArgs { dir: file }).unwrap_err().to_string();
    assert!(err.ends_with("holdup.1: not a directory"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
