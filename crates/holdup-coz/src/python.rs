//! Python frames as causal targets. The recorder walks a CPython process's
//! frames at every sample and sends each code object once (its qualified
//! name, file and line table); a frame then is a line of its file
//! (`/srv/app.py:42`), or its function (`app.py:Worker.run`: the file's
//! name and the qualified name) at `--granularity function` and where the
//! frame has no line. Code out of scope (see
//! [`crate::scope::python_file_in_scope`]) is no target.

use crate::scope::python_file_in_scope;
use crate::target::Target;
use holdup_bpf::records::{PyCode, PyCodeRec, PyFrame};
use holdup_symbolize::lines::Granularity;
use holdup_symbolize::python::lines::line_at;
use std::collections::HashMap;

/// What a frame is as a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    Line {
        file: &'a str,
        line: u32,
    },
    /// A whole function: its file's name and its qualified name.
    Function {
        file: &'a str,
        name: &'a str,
    },
}

impl Place<'_> {
    /// The target's name: a line of its file's path (the same file run by
    /// several processes is one target), a function of its file's name.
    pub fn target(&self) -> Target {
        match *self {
            Place::Line { file, line } => Target::line(None, file, line),
            Place::Function { file, name } => Target::Function {
                binary: file_name(file).to_string(),
                function: name.to_string(),
            },
        }
    }
}

/// `app.py` of `/srv/app.py`.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The code objects of the processes, by process, address and check
/// (addresses are reused); `None` for code out of scope.
#[derive(Debug, Default)]
pub struct Codes {
    scope: Option<String>,
    granularity: Granularity,
    codes: HashMap<(u32, u64, u16), Option<PyCode>>,
}

impl Codes {
    pub fn new(scope: Option<String>, granularity: Granularity) -> Codes {
        Codes {
            scope,
            granularity,
            codes: HashMap::new(),
        }
    }

    /// A code record.
    pub fn add(&mut self, r: &PyCodeRec) {
        let code =
            Some(r.decoded()).filter(|c| python_file_in_scope(self.scope.as_deref(), &c.file));
        self.codes.insert((r.pid, r.code, r.check), code);
    }

    /// Whether the code of frame `f` of `pid` has come (in scope or not).
    pub fn known(&self, pid: u32, f: &PyFrame) -> bool {
        self.codes.contains_key(&(pid, f.code, f.check))
    }

    /// Process `pid` ran another program, or ended.
    pub fn forget(&mut self, pid: u32) {
        self.codes.retain(|&(p, _, _), _| p != pid);
    }

    /// What frame `f` of process `pid` is: None when its code is out of
    /// scope or has not come.
    pub fn place(&self, pid: u32, f: &PyFrame) -> Option<Place<'_>> {
        let c = self.codes.get(&(pid, f.code, f.check))?.as_ref()?;
        // Line 0: the set-up a code object runs before its first line
        // (3.12's RESUME of a module), which is its function's.
        let line = match self.granularity {
            Granularity::Line => line_at(&c.table, c.first_line, c.units, c.v310, f.instr),
            Granularity::Function => None,
        }
        .filter(|&l| l > 0);
        Some(match line {
            Some(line) => Place::Line {
                file: &c.file,
                line,
            },
            None => Place::Function {
                file: &c.file,
                name: &c.name,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_rec(pid: u32, code: u64, name: &str, file: &str) -> Box<PyCodeRec> {
        // Code units [0, 2) on line 40, [2, 4) on line 42.
        let table = [0x81, 0, 0x80 | (12 << 3) | 1, 0, 0];
        let mut r = PyCodeRec::named(pid, code, name, file, &table);
        r.check = 3;
        r.version = 0x030c;
        r.firstlineno = 40;
        r.units = 8;
        r
    }

    fn frame(code: u64, instr: u32) -> PyFrame {
        PyFrame {
            code,
            instr,
            group_end: false,
            check: 3,
        }
    }

    #[test]
    fn a_frame_is_its_line_or_its_function_and_the_stdlib_is_no_target() {
        let mut codes = Codes::new(None, Granularity::Line);
        codes.add(&code_rec(7, 0x1000, "Worker.run", "/srv/app/worker.py"));
        codes.add(&code_rec(
            7,
            0x2000,
            "JSONDecoder.decode",
            "/usr/lib/python3.11/json/decoder.py",
        ));
        let at = |codes: &Codes, code, instr| {
            codes
                .place(7, &frame(code, instr))
                .map(|p| p.target().to_string())
        };
        assert_eq!(
            at(&codes, 0x1000, 3).as_deref(),
            Some("/srv/app/worker.py:42")
        );
        assert_eq!(
            at(&codes, 0x1000, 1).as_deref(),
            Some("/srv/app/worker.py:40")
        );
        // No line (outside the code, or not known): the function.
        assert_eq!(
            at(&codes, 0x1000, 9).as_deref(),
            Some("worker.py:Worker.run")
        );
        assert_eq!(
            at(&codes, 0x1000, u32::MAX).as_deref(),
            Some("worker.py:Worker.run")
        );
        // Out of scope, not come, another check, another process.
        assert!(codes.known(7, &frame(0x2000, 1)));
        assert_eq!(at(&codes, 0x2000, 1), None);
        assert!(!codes.known(7, &frame(0x3000, 1)));
        assert_eq!(
            codes.place(
                7,
                &PyFrame {
                    check: 4,
                    ..frame(0x1000, 1)
                }
            ),
            None
        );
        assert_eq!(codes.place(8, &frame(0x1000, 1)), None);
        // Names go through the target parser and back.
        for name in ["/srv/app/worker.py:42", "worker.py:Worker.run"] {
            assert_eq!(Target::parse(name).unwrap().to_string(), name);
        }
        codes.forget(7);
        assert!(!codes.known(7, &frame(0x1000, 1)));

        let mut functions = Codes::new(Some("**/json/*.py".into()), Granularity::Function);
        functions.add(&code_rec(7, 0x1000, "Worker.run", "/srv/app/worker.py"));
        functions.add(&code_rec(
            7,
            0x2000,
            "JSONDecoder.decode",
            "/usr/lib/python3.11/json/decoder.py",
        ));
        assert_eq!(at(&functions, 0x1000, 3), None);
        assert_eq!(
            at(&functions, 0x2000, 3).as_deref(),
            Some("decoder.py:JSONDecoder.decode")
        );
    }
}
