//! Functions named as people type them, in probe specs: `ns::Cls::work` for
//! the C++ overloads `ns::Cls::work(int)` and `ns::Cls::work(double) const`,
//! and `ns::twice` for the template's instantiations (`workloads/overloads.cpp`).

use crate::support::names::*;

#[test]
fn probe_specs_find_every_overload_by_its_demangled_name() {
    use holdup_coz::probe::resolve;
    let bin = overloads("overloads-probe");
    let sites = |spec: &str| resolve(Some(&bin), spec).map(|s| s.len());
    assert_eq!(sites("ns::Cls::work"), Ok(2));
    assert_eq!(sites("ns::twice"), Ok(2));
    assert_eq!(sites("ns::twice<long>"), Ok(1));
    assert_eq!(sites("ns::Cls::work(int)"), Ok(1));
    // Mangled names still work, and the `::` is no BINARY: separator.
    assert_eq!(sites("_ZN2ns3Cls4workEi"), Ok(1));
    let with_binary = format!("{}:ns::Cls::work", bin.display());
    assert_eq!(resolve(None, &with_binary).map(|s| s.len()), Ok(2));
    let e = resolve(None, "ns::Cls::work").unwrap_err();
    assert!(e.contains("BINARY:ns::Cls::work"), "{e}");
    // A miss names the closest functions.
    let e = resolve(Some(&bin), "ns::Cls::wrok").unwrap_err();
    assert!(e.contains("no function 'ns::Cls::wrok'"), "{e}");
    assert!(e.contains("closest: ns::Cls::work"), "{e}");
}
