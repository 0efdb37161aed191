//! A debuginfod server for the `debuginfo` end-to-end tests, with and without root.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A debuginfod serving the files under a directory, on a free port.
pub struct Debuginfod {
    pub child: Child,
    pub url: String,
}

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The HTTP status of `GET url` (0 if nothing answers).
pub fn status_of(url: &str) -> u32 {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return 0;
    };
    let _ = write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
    let mut head = [0u8; 12];
    if s.read_exact(&mut head).is_err() {
        return 0;
    }
    String::from_utf8_lossy(&head[9..12]).parse().unwrap_or(0)
}

impl Debuginfod {
    /// Serve `dir`; ready once it serves the debug file of `build_id`.
    pub fn serve(dir: &Path, build_id: &str) -> Debuginfod {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let db = dir.with_file_name("debuginfod.sqlite");
        let child = Command::new("debuginfod")
            .args(["-F", dir.to_str().unwrap(), "-d", db.to_str().unwrap()])
            .args(["-p", &port.to_string(), "-t", "0", "-g", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("debuginfod (scripts/deps installs it)");
        let server = Debuginfod {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let file = format!("{}/buildid/{build_id}/debuginfo", server.url);
        let began = Instant::now();
        while status_of(&file) != 200 {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "debuginfod did not serve {file} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}
