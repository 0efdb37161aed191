//! Function names as people type them: `rocksdb::DBImpl::GetImpl` or
//! `mycrate::module::function` for the mangled symbols of C++ and Rust,
//! without parameters (every overload, template instantiation or
//! monomorphization that answers to it), with them (`ns::f(int)`), or the
//! mangled symbol itself.

/// A spec's optional `BINARY:` prefix and the rest: the first `:` that is
/// not half of a `::` (C++ and Rust paths) splits them, and only when
/// `is_binary` accepts the prefix (a source file is never one).
pub fn split_binary(spec: &str, is_binary: impl Fn(&str) -> bool) -> Option<(&str, &str)> {
    let b = spec.as_bytes();
    let at = (0..b.len())
        .find(|&i| b[i] == b':' && b.get(i + 1) != Some(&b':') && (i == 0 || b[i - 1] != b':'))?;
    let (head, rest) = (&spec[..at], &spec[at + 1..]);
    (!head.is_empty() && is_binary(head)).then_some((head, rest))
}

/// Whether a spec (after any binary) is `FILE:LINE`: it ends in `:N`
/// after a single colon, so that no `::` path is taken for a file.
pub fn is_file_line(what: &str) -> bool {
    what.rsplit_once(':').is_some_and(|(head, n)| {
        !head.is_empty() && !head.ends_with(':') && n.parse::<u32>().is_ok()
    })
}

/// The names a symbol answers to: demangled in full
/// (`ns::Cls::work(int)`), without parameters (`ns::Cls::work`), and
/// without template arguments either (`ns::twice<int>` → `ns::twice`).
/// Empty for a name that is not mangled.
pub fn demangled_forms(raw: &str) -> Vec<String> {
    let (full, bare) = if let Ok(d) = rustc_demangle::try_demangle(raw) {
        // `{:#}` leaves out the hash of a legacy name.
        let s = format!("{d:#}");
        (s.clone(), s)
    } else if raw.starts_with("_Z") {
        let Ok(sym) = cpp_demangle::Symbol::new(raw) else {
            return Vec::new();
        };
        let opts = cpp_demangle::DemangleOptions::new().no_return_type();
        let (Ok(full), Ok(bare)) = (
            sym.demangle_with_options(&opts),
            sym.demangle_with_options(&opts.no_params()),
        ) else {
            return Vec::new();
        };
        (full, bare)
    } else {
        return Vec::new();
    };
    let plain = without_template_args(&bare);
    let mut v = vec![full, bare, plain];
    v.dedup();
    v
}

/// `a::b<int>::c<T>` → `a::b::c`: what is inside `<…>` at any depth is
/// left out (an `operator<` keeps its name, its `<` not being followed by
/// a closing one).
fn without_template_args(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '<' if s[i..].contains('>') => {
                // Rust writes `f::<u32>`: its `::` goes with the arguments.
                if depth == 0 && out.ends_with("::") {
                    out.truncate(out.len() - 2);
                }
                depth += 1
            }
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A symbol as people read it: demangled in full, or as it is.
pub fn readable(raw: &str) -> String {
    demangled_forms(raw)
        .into_iter()
        .next()
        .unwrap_or_else(|| raw.to_string())
}

/// A symbol as a causal target names it: demangled without parameters
/// (`rocksdb::LRUCacheShard::Lookup`), or as it is.
pub fn without_params(raw: &str) -> String {
    let mut forms = demangled_forms(raw);
    match forms.len() {
        0 => raw.to_string(),
        1 => forms.swap_remove(0),
        _ => forms.swap_remove(1),
    }
}

/// Whether the symbol `raw` is what `wanted` names: the same symbol, or
/// one of its demangled forms.
pub fn answers_to(raw: &str, wanted: &str) -> bool {
    raw == wanted || (may_answer(raw, wanted) && demangled_forms(raw).iter().any(|f| f == wanted))
}

/// Whether `raw` can answer to `wanted` at all: a mangled name holds the
/// function's own name as it is (`Lookup` in `_ZN7rocksdb13LRUCacheShard6LookupE…`),
/// which saves demangling every symbol of a large library to find one.
/// Operators are mangled as codes: those always may.
fn may_answer(raw: &str, wanted: &str) -> bool {
    let head = wanted.split('(').next().unwrap_or(wanted);
    let last = head.rsplit("::").next().unwrap_or(head);
    let last = last
        .split('<')
        .next()
        .unwrap_or(last)
        .trim_start_matches('~');
    last.is_empty() || last.starts_with("operator") || raw.contains(last)
}

/// How many close names a miss lists.
const CLOSEST: usize = 5;

/// The names among `raws` (as people read them: demangled without
/// parameters) closest to `wanted`: those that contain its last part
/// (`GetImpl` of `rocksdb::DBImpl::GetImpl`) first, then by edit distance
/// (within half its length); at most a handful.
pub fn closest<'a>(wanted: &str, raws: impl Iterator<Item = &'a str>) -> Vec<String> {
    let last = wanted
        .rsplit("::")
        .next()
        .unwrap_or(wanted)
        .to_ascii_lowercase();
    let mut names: Vec<String> = raws.map(without_params).collect();
    names.sort();
    names.dedup();
    let mut scored: Vec<(bool, usize, String)> = names
        .into_iter()
        .map(|n| {
            let contains = !last.is_empty() && n.to_ascii_lowercase().contains(&last);
            (!contains, strsim::levenshtein(&n, wanted), n)
        })
        .collect();
    scored.retain(|&(far, d, _)| !far || d <= wanted.len() / 2);
    scored.sort();
    scored
        .into_iter()
        .take(CLOSEST)
        .map(|(_, _, n)| n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_prefix_is_split_at_a_single_colon_only() {
        let any = |_: &str| true;
        assert_eq!(
            split_binary("librocksdb.so:rocksdb::DBImpl::GetImpl", any),
            Some(("librocksdb.so", "rocksdb::DBImpl::GetImpl"))
        );
        assert_eq!(split_binary("rocksdb::DBImpl::GetImpl", any), None);
        assert_eq!(split_binary("::global", any), None);
        assert_eq!(
            split_binary("/bin/app:src/a.c:10", any),
            Some(("/bin/app", "src/a.c:10"))
        );
        // A prefix the caller does not take for a binary stays in the spec.
        assert_eq!(split_binary("a.c:10", |h| h != "a.c"), None);
    }

    #[test]
    fn a_path_ending_in_a_number_is_no_line() {
        assert!(is_file_line("src/a.c:10"));
        assert!(is_file_line("/src/a:b.c:3"));
        assert!(!is_file_line("ns::f"));
        assert!(!is_file_line("ns::12"));
        assert!(!is_file_line(":10"));
    }

    #[test]
    fn cpp_names_match_with_and_without_parameters_and_template_arguments() {
        // ns::Cls::work(int) and ns::Cls::work(double) const.
        let (a, b) = ("_ZN2ns3Cls4workEi", "_ZNK2ns3Cls4workEd");
        for raw in [a, b] {
            assert!(answers_to(raw, "ns::Cls::work"), "{raw}");
            assert!(answers_to(raw, raw));
        }
        assert!(answers_to(a, "ns::Cls::work(int)"));
        // Constructors, destructors and operators answer too.
        assert!(answers_to("_ZN2ns3ClsC1Ev", "ns::Cls::Cls"));
        assert!(answers_to("_ZN2ns3ClsD2Ev", "ns::Cls::~Cls"));
        assert!(answers_to("_ZN2ns3ClsclEv", "ns::Cls::operator()"));
        assert!(!answers_to(b, "ns::Cls::work(int)"));
        assert!(!answers_to(a, "ns::Cls::wor"));
        assert!(!answers_to(a, "Cls::work"));
        // int ns::twice<int>(int)
        let t = "_ZN2ns5twiceIiEET_S1_";
        assert!(answers_to(t, "ns::twice<int>"));
        assert!(answers_to(t, "ns::twice"));
        assert_eq!(without_params(a), "ns::Cls::work");
        assert_eq!(without_params(t), "ns::twice<int>");
        assert_eq!(without_params("main"), "main");
        // A C name is only itself.
        assert!(answers_to("main", "main"));
        assert!(demangled_forms("main").is_empty());
    }

    #[test]
    fn rust_names_match_without_their_hash() {
        // mycrate::module::function, legacy mangling.
        let legacy = "_ZN7mycrate6module8function17h0123456789abcdefE";
        assert!(answers_to(legacy, "mycrate::module::function"));
        assert!(!answers_to(legacy, "mycrate::module"));
        // v0 mangling of mycrate::module::function::<u32>.
        let v0 = "_RINvNtCs1234_7mycrate6module8functionmEB4_";
        let forms = demangled_forms(v0);
        assert!(
            forms.iter().any(|f| f == "mycrate::module::function"),
            "{forms:?}"
        );
    }

    #[test]
    fn a_miss_lists_the_closest_names() {
        let raws = [
            "_ZN7rocksdb6DBImpl7GetImplEv",
            "_ZN7rocksdb6DBImpl3GetEv",
            "_ZN7rocksdb7Version3GetEv",
            "unrelated",
        ];
        let near = closest("rocksdb::DBImpl::GetImp", raws.iter().copied());
        assert_eq!(near[0], "rocksdb::DBImpl::GetImpl");
        assert!(near.len() <= CLOSEST);
        let near = closest("rocksdb::DBImpl::get", raws.iter().copied());
        assert!(
            near[..3].contains(&"rocksdb::DBImpl::Get".to_string()),
            "{near:?}"
        );
    }
}
