//! The OpenTelemetry exporter's environment variables, as the
//! specification words them: where profiles go
//! (`OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT` as it is,
//! `OTEL_EXPORTER_OTLP_ENDPOINT` as a base URL), with which headers
//! (`OTEL_EXPORTER_OTLP_PROFILES_HEADERS`, `OTEL_EXPORTER_OTLP_HEADERS`),
//! compressed or not (`OTEL_EXPORTER_OTLP_COMPRESSION`), and the resource
//! (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SERVICE_NAME`).

use anyhow::{bail, Context};
use holdup_render::export::otlp::{Value, PATH};

/// The default base URL of OTLP/HTTP.
pub const DEFAULT_BASE: &str = "http://localhost:4318";

/// `base` with the profiles path appended: relative to it, so a base with
/// a path keeps it.
pub fn signal_url(base: &str) -> String {
    // A URL without a host is left as it is, for the error to name it.
    let (_, rest) = base.split_once("://").unwrap_or(("", base));
    if rest.is_empty() || rest.starts_with('/') {
        return base.to_string();
    }
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        PATH.trim_start_matches('/')
    )
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The profiles URL: `--endpoint` (a base URL), else the per-signal
/// variable as it is, else the base one with the path appended, else the
/// default.
pub fn endpoint(flag: Option<&str>) -> String {
    match (
        flag,
        env("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"),
        env("OTEL_EXPORTER_OTLP_ENDPOINT"),
    ) {
        (Some(base), _, _) => signal_url(base),
        (None, Some(url), _) => url.trim().to_string(),
        (None, None, Some(base)) => signal_url(base.trim()),
        (None, None, None) => signal_url(DEFAULT_BASE),
    }
}

/// `s` with `%XX` escapes decoded; a broken escape is an error.
fn percent_decoded(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let v = u8::from_str_radix(s.get(i + 1..i + 3)?, 16).ok()?;
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `key1=value1,key2=value2`, keys trimmed, values percent-decoded; `what`
/// names the variable in errors.
pub fn key_values(text: &str, what: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            bail!("{what}: '{}' is not KEY=VALUE", pair.trim());
        };
        let key = k.trim();
        let value = percent_decoded(v.trim())
            .with_context(|| format!("{what}: the value of {key} has a broken %-escape"))?;
        if key.is_empty() {
            bail!("{what}: a pair has no key");
        }
        out.push((key.to_string(), value));
    }
    Ok(out)
}

/// Headers from the environment (the per-signal variable wins over the
/// general one for a name in both).
pub fn headers() -> anyhow::Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for var in [
        "OTEL_EXPORTER_OTLP_PROFILES_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ] {
        if let Some(text) = env(var) {
            for (k, v) in key_values(&text, var)? {
                crate::upload::parse_header(&format!("{k}={v}"))
                    .map_err(|e| anyhow::anyhow!("{var}: {e}"))?;
                if !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(&k)) {
                    out.push((k, v));
                }
            }
        }
    }
    Ok(out)
}

/// Whether to gzip: `--compression`, else the environment, else gzip.
pub fn gzip(flag: Option<&str>) -> anyhow::Result<bool> {
    let from_env = env("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION")
        .or_else(|| env("OTEL_EXPORTER_OTLP_COMPRESSION"));
    match flag
        .map(str::to_string)
        .or(from_env)
        .as_deref()
        .map(str::trim)
    {
        None | Some("gzip") => Ok(true),
        Some("none") => Ok(false),
        Some(other) => bail!("compression '{other}' is not gzip or none"),
    }
}

/// Attributes of every resource: `OTEL_RESOURCE_ATTRIBUTES`, with
/// `OTEL_SERVICE_NAME` as `service.name` over it.
pub fn resource_attributes() -> anyhow::Result<Vec<(String, Value)>> {
    let mut out: Vec<(String, Value)> = match env("OTEL_RESOURCE_ATTRIBUTES") {
        Some(text) => key_values(&text, "OTEL_RESOURCE_ATTRIBUTES")?
            .into_iter()
            .map(|(k, v)| (k, Value::Str(v)))
            .collect(),
        None => Vec::new(),
    };
    if let Some(name) = env("OTEL_SERVICE_NAME") {
        out.retain(|(k, _)| k != "service.name");
        out.push(("service.name".into(), Value::Str(name.trim().to_string())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profiles_path_is_relative_to_a_base() {
        assert_eq!(
            signal_url("http://c:4318"),
            "http://c:4318/v1development/profiles"
        );
        assert_eq!(
            signal_url("http://c:4318/x/"),
            "http://c:4318/x/v1development/profiles"
        );
        assert_eq!(signal_url("http://"), "http://");
        assert_eq!(signal_url("http://"), "http://");
    }

    #[test]
    fn pairs_are_trimmed_and_decoded() {
        assert_eq!(
            key_values(" a = b%2Cc ,api-key=x%3Dy", "V").unwrap(),
            [("a".into(), "b,c".into()), ("api-key".into(), "x=y".into())]
        );
        assert!(key_values("novalue", "V").is_err());
        assert!(key_values("a=%zz", "V").is_err());
        assert!(key_values("=v", "V").is_err());
    }
}
