//! Where a profile is pushed, and as whom: the URL (with any credentials
//! written into it taken out), the roots that https trusts, the
//! authentication and extra headers, and the secrets no message may show.
//!
//! Credentials come from flags, files or the environment:
//! `--basic-auth USER:PASS`, `--basic-auth-file FILE` (holding
//! `USER:PASS`), `https://USER:PASS@host` in the URL, or
//! `HOLDUP_PUSH_BASIC_AUTH=USER:PASS`; `--bearer-token TOKEN`,
//! `--bearer-token-file FILE` or `HOLDUP_PUSH_TOKEN=TOKEN`. The environment
//! is read only when no flag or URL gives any. Every message about a push
//! names the URL without its credentials, and any secret a server echoes
//! back is replaced by `***`.

use super::ConnectArgs;
use anyhow::{anyhow, bail, Context};
use std::path::Path;
use std::sync::Arc;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

/// Basic authentication as `USER:PASS`, from the environment.
pub const BASIC_AUTH_ENV: &str = "HOLDUP_PUSH_BASIC_AUTH";
/// A bearer token, from the environment.
pub const TOKEN_ENV: &str = "HOLDUP_PUSH_TOKEN";

/// A server to push to, ready for requests.
pub struct Endpoint {
    /// The URL without credentials: where requests go, what messages name.
    pub url: String,
    /// Authorization, tenant and the user's headers, sent with every request.
    pub headers: Vec<(String, String)>,
    /// For https: the roots to trust.
    tls: Option<TlsConfig>,
    /// What [`Endpoint::redact`] hides.
    secrets: Vec<String>,
}

/// The parts of a push URL.
struct Url {
    https: bool,
    /// `user:pass` written before `@`, percent-decoded.
    credentials: Option<(String, String)>,
    /// The URL without them.
    bare: String,
}

/// `s` with `%XX` escapes decoded.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%')
            .then(|| s.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a URL may be shown as: without anything before an `@` in its
/// authority.
fn shown(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = rest[..end].rsplit('@').next().unwrap_or("");
    let prefix = if scheme.is_empty() {
        String::new()
    } else {
        format!("{scheme}://")
    };
    format!("{prefix}{host}{}", &rest[end..])
}

fn parse_url(url: &str) -> anyhow::Result<Url> {
    let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        bail!("{}: not an http:// URL or an https:// one", shown(url));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if host.is_empty() {
        bail!("{}: no host", shown(url));
    }
    let credentials = userinfo.map(|u| {
        let (user, pass) = u.split_once(':').unwrap_or((u, ""));
        (percent_decode(user), percent_decode(pass))
    });
    let scheme = if https { "https" } else { "http" };
    Ok(Url {
        https,
        credentials,
        bare: format!("{scheme}://{host}{tail}"),
    })
}

/// A secret from a file: its first line, which must not be empty (at
/// most 64 KiB are read).
fn read_secret(path: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(64 * 1024).read_to_string(&mut text))
        .with_context(|| format!("cannot read {}", path.display()))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        bail!("{} is empty", path.display());
    }
    Ok(line.to_string())
}

fn split_basic(s: &str, from: &str) -> anyhow::Result<(String, String)> {
    match s.split_once(':') {
        Some((u, p)) if !u.is_empty() => Ok((u.to_string(), p.to_string())),
        _ => bail!("the basic authentication from {from} is not USER:PASS"),
    }
}

/// RFC 4648 base64, for the basic authentication header.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The authentication to send: basic or bearer, from the first source
/// that gives one (see the module's documentation).
enum Auth {
    None,
    Basic(String, String),
    Bearer(String),
}

fn auth(args: &ConnectArgs, url: &Url) -> anyhow::Result<Auth> {
    let mut basic = Vec::new();
    if let Some(s) = &args.basic_auth {
        basic.push(split_basic(s, "--basic-auth")?);
    }
    if let Some(p) = &args.basic_auth_file {
        basic.push(split_basic(&read_secret(p)?, &p.display().to_string())?);
    }
    if let Some(c) = &url.credentials {
        basic.push(c.clone());
    }
    let bearer = match (&args.bearer_token, &args.bearer_token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(p)) => Some(read_secret(p)?),
        (None, None) => None,
    };
    if basic.len() > 1 || (!basic.is_empty() && bearer.is_some()) {
        bail!("credentials given more than once (flags, a file, the URL): give one");
    }
    if let Some((user, pass)) = basic.pop() {
        return Ok(Auth::Basic(user, pass));
    }
    if let Some(token) = bearer {
        return Ok(Auth::Bearer(token));
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (env(BASIC_AUTH_ENV), env(TOKEN_ENV)) {
        (Some(_), Some(_)) => bail!("both {BASIC_AUTH_ENV} and {TOKEN_ENV} are set: unset one"),
        (Some(b), None) => {
            let (user, pass) = split_basic(&b, BASIC_AUTH_ENV)?;
            Ok(Auth::Basic(user, pass))
        }
        (None, Some(t)) => Ok(Auth::Bearer(t)),
        (None, None) => Ok(Auth::None),
    }
}

/// The roots https trusts: the system's (as OpenSSL finds them, honouring
/// `SSL_CERT_FILE` and `SSL_CERT_DIR`) and those of `--ca-cert`; Mozilla's
/// built-in roots where the system has none and no file is given.
fn tls(ca_cert: Option<&Path>) -> anyhow::Result<TlsConfig> {
    let mut roots: Vec<Certificate<'static>> = rustls_native_certs::load_native_certs()
        .certs
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    if let Some(path) = ca_cert {
        let pem = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut found = 0;
        for item in ureq::tls::parse_pem(&pem) {
            if let Ok(PemItem::Certificate(c)) = item {
                roots.push(c);
                found += 1;
            }
        }
        if found == 0 {
            bail!("{}: no PEM certificate in it", path.display());
        }
    }
    let roots = if roots.is_empty() {
        RootCerts::WebPki
    } else {
        RootCerts::Specific(Arc::new(roots))
    };
    Ok(TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(roots)
        .build())
}

impl Endpoint {
    /// Check the URL and gather what pushing to it needs; errors never
    /// show a credential.
    pub fn new(url: &str, args: &ConnectArgs) -> anyhow::Result<Self> {
        let parsed = parse_url(url)?;
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut secrets = Vec::new();
        match auth(args, &parsed)? {
            Auth::None => {}
            Auth::Basic(user, pass) => {
                let both = format!("{user}:{pass}");
                let encoded = base64(both.as_bytes());
                headers.push(("authorization".into(), format!("Basic {encoded}")));
                secrets.extend([pass, both, encoded]);
            }
            Auth::Bearer(token) => {
                headers.push(("authorization".into(), format!("Bearer {token}")));
                secrets.push(token);
            }
        }
        if let Some(t) = &args.tenant {
            headers.push(("x-scope-orgid".into(), t.clone()));
        }
        for (name, value) in &args.headers {
            if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                bail!(
                    "header {name} is given twice (by --header and another option): give it once"
                );
            }
            headers.push((name.clone(), value.clone()));
            secrets.push(value.clone());
        }
        if !parsed.https && args.ca_cert.is_some() {
            bail!("--ca-cert is for https:// URLs");
        }
        let tls = parsed
            .https
            .then(|| tls(args.ca_cert.as_deref()))
            .transpose()?;
        // Short secrets would blank out ordinary words; they are never put
        // into a message by holdup itself.
        secrets.retain(|s| s.len() >= 4);
        Ok(Endpoint {
            url: parsed.bare,
            headers,
            tls,
            secrets,
        })
    }

    /// `msg` with every secret replaced by `***`.
    pub fn redact(&self, msg: &str) -> String {
        let mut msg = msg.to_string();
        for s in &self.secrets {
            msg = msg.replace(s.as_str(), "***");
        }
        msg
    }

    /// An agent for this server: no redirects (credentials must not follow
    /// one elsewhere), answers with error statuses read like any other.
    pub fn agent(&self) -> ureq::Agent {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0);
        if let Some(tls) = &self.tls {
            config = config.tls_config(tls.clone());
        }
        config.build().into()
    }
}

/// `NAME=VALUE` of `--header`: a token name, a value without line breaks.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{}' is not NAME=VALUE", shown_header(s)))?;
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if k.is_empty() || !k.chars().all(token) {
        return Err(format!("'{k}' is not a header name"));
    }
    if v.contains(['\r', '\n', '\0']) {
        return Err(format!("the value of header {k} has a line break"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// A malformed `--header` as it may be shown: its name, if it has one.
fn shown_header(s: &str) -> &str {
    s.split([':', ' ']).next().unwrap_or("")
}

/// An error about a push with its secrets hidden, as one line.
pub fn redacted(e: anyhow::Error, endpoint: Option<&Endpoint>) -> anyhow::Error {
    let msg = crate::one_line(&e);
    match endpoint {
        Some(ep) => anyhow!(ep.redact(&msg)),
        None => anyhow!(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_taken_out_and_decoded() {
        let u = parse_url("https://us%40er:p%3Ass@host:4040/base?x=1").unwrap();
        assert!(u.https);
        assert_eq!(u.bare, "https://host:4040/base?x=1");
        assert_eq!(u.credentials, Some(("us@er".into(), "p:ss".into())));
        let u = parse_url("http://host").unwrap();
        assert_eq!(
            (u.https, u.credentials, u.bare.as_str()),
            (false, None, "http://host")
        );
        for bad in [
            "ftp://u:secret@host",
            "u:secret@host:80",
            "https://u:secret@/x",
        ] {
            let e = parse_url(bad).err().unwrap().to_string();
            assert!(!e.contains("secret") && !e.contains("u:"), "{e}");
        }
    }

    #[test]
    fn base64_is_rfc_4648() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
            ("Aladdin:open sesame", "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn headers_are_checked() {
        assert_eq!(
            parse_header("X-Scope-OrgID=a=b"),
            Ok(("X-Scope-OrgID".into(), "a=b".into()))
        );
        assert!(parse_header("X Y=1").is_err());
        assert!(parse_header("X=a\r\nInjected: 1").is_err());
        let e = parse_header("Authorization: Bearer sekrit").unwrap_err();
        assert!(!e.contains("sekrit"), "{e}");
    }
}
