//! This process's Python frames as locations, when it is a CPython whose
//! frames the recorder walks: the code records come through the ring with
//! the samples, and each frame in scope becomes a location of the
//! processor's table, named as [`holdup_coz::python`] names targets.

use crate::lines::Locations;
use holdup_bpf::records::{PyCodeRec, PyFrame};
use holdup_coz::python::{file_name, Codes, Place};
use holdup_symbolize::lines::Granularity;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Default)]
pub struct PythonLocs {
    codes: Codes,
    /// Locations of frames (code, check, instruction) seen before.
    by_frame: HashMap<(u64, u16, u32), u32>,
    /// Function locations by file and qualified name.
    functions: HashMap<(String, String), u32>,
    /// The locations that are Python lines (named without a binary).
    lines: HashSet<u32>,
    /// A sample had interpreter frames: the interpreter's own machine code
    /// stands for them, and is no target from then on.
    pub seen: bool,
}

impl PythonLocs {
    pub fn new(scope: Option<String>, granularity: Granularity) -> PythonLocs {
        PythonLocs {
            codes: Codes::new(scope, granularity),
            ..Default::default()
        }
    }

    pub fn code(&mut self, r: &PyCodeRec) {
        self.codes.add(r);
    }

    /// The location of frame `f` of this process (`pid`), if in scope.
    pub fn loc(&mut self, locs: &mut Locations, pid: u32, f: &PyFrame) -> Option<u32> {
        let key = (f.code, f.check, f.instr);
        if let Some(&loc) = self.by_frame.get(&key) {
            return Some(loc);
        }
        let loc = match self.codes.place(pid, f)? {
            Place::Line { file, line } => {
                let loc = locs.line(file, line);
                self.lines.insert(loc);
                loc
            }
            Place::Function { file, name } => *self
                .functions
                .entry((file.to_string(), name.to_string()))
                .or_insert_with(|| locs.function(file_name(file), name)),
        };
        self.by_frame.insert(key, loc);
        Some(loc)
    }

    /// Whether `loc` is a line of Python source.
    pub fn is_line(&self, loc: u32) -> bool {
        self.lines.contains(&loc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_coz::target::Target;

    #[test]
    fn frames_become_locations_once_named_like_every_python_target() {
        // Code units [0, 4) on line 10.
        let mut r = PyCodeRec::named(7, 0x1000, "hot", "/srv/app.py", &[0x80 | (13 << 3) | 3, 0]);
        r.check = 1;
        r.version = 0x030d;
        r.firstlineno = 10;
        let f = |instr| PyFrame {
            code: 0x1000,
            instr,
            group_end: true,
            check: 1,
        };
        for (granularity, want) in [
            (Granularity::Line, "/srv/app.py:10"),
            (Granularity::Function, "app.py:hot"),
        ] {
            let mut locs = Locations::default();
            let mut py = PythonLocs::new(None, granularity);
            assert_eq!(py.loc(&mut locs, 7, &f(1)), None, "before its code came");
            py.code(&r);
            let a = py.loc(&mut locs, 7, &f(1)).unwrap();
            assert_eq!(py.loc(&mut locs, 7, &f(2)), Some(a));
            assert_eq!(locs.len(), 1);
            let target = match locs.place(a) {
                holdup_symbolize::lines::Place::Line { file, line } => {
                    assert!(py.is_line(a));
                    Target::line(None, file, line)
                }
                holdup_symbolize::lines::Place::Function { binary, symbol } => {
                    assert!(!py.is_line(a));
                    Target::Function {
                        binary: binary.into(),
                        function: symbol.into(),
                    }
                }
            };
            assert_eq!(target.to_string(), want);
        }
    }
}
