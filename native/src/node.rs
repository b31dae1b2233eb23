//! The node as the engine reads it: JSON-RPC over http:// or https:// straight to the node (ureq: a pool of
//! keep-alive connections, rustls on ring for TLS), with the node's URL, credentials, extra headers and CA given once.
//! Blocking: it runs on the engine's own threads, never on the JS event loop. Counts every call (the `node reads`
//! metric). No message it makes carries the URL, its credentials or its host.
use base64::Engine as _;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use ureq::http::{HeaderName, HeaderValue};
use ureq::tls::{Certificate, RootCerts, TlsConfig};
use ureq::Agent;

/// Largest answer read from the node; a larger one fails the call.
const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;
/// Kept-alive connections per node (the apply thread, up to 16 read threads, the trace thread).
const MAX_IDLE_CONNECTIONS: usize = 18;
/// A connection idle longer than this is not reused (src/node/client.ts's DEFAULT_KEEPALIVE_IDLE_MS).
const MAX_IDLE: Duration = Duration::from_secs(4);

/// How the engine reaches its node, besides the URL.
#[derive(Default)]
pub struct NodeOptions {
    /// Per call, connect to last answer byte.
    pub timeout_ms: u64,
    /// Sent with every call (e.g. an API key header); an `Authorization` here wins over the URL's credentials.
    pub headers: Vec<(String, String)>,
    /// Trusted besides the Mozilla roots (webpki), PEM: the CA of a private node, or a test's self-signed one.
    pub ca_pem: Option<String>,
}

/// A JSON-RPC client for one node.
pub struct NodeClient {
    agent: Agent,
    /// The URL without its credentials.
    url: String,
    /// Scrubbed from every error message (a TLS name mismatch names it).
    host: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    reads: AtomicU64,
}

/// Why a node call failed; the message never carries the URL.
#[derive(Debug, Clone)]
pub struct NodeError(pub String);

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `url` split into the URL to call, its host, and `user:password` (percent-decoded) when it has credentials.
fn split_url(url: &str) -> Result<(String, String, Option<String>), NodeError> {
    let scheme_end = url.find("://").ok_or_else(|| NodeError("node URL is not an http:// or https:// URL".into()))?;
    let scheme = url[..scheme_end].to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(NodeError(format!("node URL is not an http:// or https:// URL ({scheme}:)")));
    }
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, host_port) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    if host_port.is_empty() {
        return Err(NodeError("node URL has no host".into()));
    }
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host_port.split(':').next().unwrap_or(host_port),
    };
    let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
    let credentials = userinfo.map(|u| match u.split_once(':') {
        Some((user, pass)) => format!("{}:{}", decode(user), decode(pass)),
        None => format!("{}:", decode(u)),
    });
    Ok((format!("{scheme}://{host_port}{tail}"), host.to_string(), credentials))
}

/// The Mozilla roots plus the certificates of `pem`.
fn roots_with(pem: &str) -> Result<RootCerts, NodeError> {
    let mut certs: Vec<Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|c| Certificate::from_der(c.as_ref())).collect();
    let before = certs.len();
    for item in ureq::tls::parse_pem(pem.as_bytes()) {
        if let Ok(ureq::tls::PemItem::Certificate(c)) = item {
            certs.push(c);
        }
    }
    if certs.len() == before {
        return Err(NodeError("the node CA has no PEM certificate in it".into()));
    }
    Ok(RootCerts::new_with_certs(&certs))
}

impl NodeClient {
    /// A plain client (tests): no extra headers, the Mozilla roots.
    pub fn new(url: &str, timeout_ms: u64) -> Result<Self, NodeError> {
        Self::with(url, NodeOptions { timeout_ms, ..NodeOptions::default() })
    }

    /// `url`: http(s)://[user:password@]host[:port][/path][?query]; its credentials become a Basic authorization.
    pub fn with(url: &str, o: NodeOptions) -> Result<Self, NodeError> {
        let (url, host, credentials) = split_url(url)?;
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(o.headers.len() + 1);
        let mut add = |k: &str, v: &str| -> Result<(), NodeError> {
            let name = HeaderName::try_from(k).map_err(|_| NodeError(format!("node header {k:?} is not a valid header name")))?;
            let mut value = HeaderValue::try_from(v).map_err(|_| NodeError(format!("node header {k:?} has a value that is not valid in HTTP")))?;
            value.set_sensitive(true);
            headers.retain(|(h, _)| h != name);
            headers.push((name, value));
            Ok(())
        };
        if let Some(c) = credentials {
            add("authorization", &format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(c)))?;
        }
        for (k, v) in &o.headers {
            add(k, v)?;
        }
        let roots = match &o.ca_pem {
            Some(pem) => roots_with(pem)?,
            None => RootCerts::WebPki,
        };
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(o.timeout_ms.max(100))))
            // The status and body are judged here (a JSON-RPC error may come with a 4xx or 5xx).
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            // Like the daemon's own node client: no proxy from the environment.
            .proxy(None)
            .max_idle_connections(MAX_IDLE_CONNECTIONS)
            .max_idle_connections_per_host(MAX_IDLE_CONNECTIONS)
            .max_idle_age(MAX_IDLE)
            .tls_config(TlsConfig::builder().root_certs(roots).build())
            .build()
            .into();
        Ok(Self { agent, url, host, headers, reads: AtomicU64::new(0) })
    }

    /// JSON-RPC calls made so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// One call; its `result`.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, NodeError> {
        let mut out = self.batch(&[(method.to_string(), params)])?;
        out.pop().unwrap_or_else(|| Err(NodeError("empty answer".into())))
    }

    /// Several calls in one JSON-RPC batch; results in call order (each a result or that call's error).
    pub fn batch(&self, calls: &[(String, Value)]) -> Result<Vec<Result<Value, NodeError>>, NodeError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        self.reads.fetch_add(calls.len() as u64, Ordering::Relaxed);
        let body: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (m, p))| json!({"jsonrpc": "2.0", "id": i, "method": m, "params": p}))
            .collect();
        let body = serde_json::to_vec(&body).map_err(|e| NodeError(e.to_string()))?;
        let answer = self.post(&body)?;
        let v: Value = serde_json::from_slice(&answer).map_err(|_| NodeError("node answered with invalid JSON".into()))?;
        let items = match v {
            Value::Array(items) => items,
            other => {
                // A node may answer a whole batch with one error object.
                let msg = other.get("error").and_then(|e| e.get("message")).and_then(|m| m.as_str()).unwrap_or("unexpected answer");
                return Err(NodeError(format!("node refused the batch: {msg}")));
            }
        };
        let mut out: Vec<Result<Value, NodeError>> = (0..calls.len()).map(|_| Err(NodeError("no answer for this call".into()))).collect();
        for item in items {
            let Some(id) = item.get("id").and_then(|i| i.as_u64()) else { continue };
            let Some(slot) = out.get_mut(id as usize) else { continue };
            *slot = match (item.get("result"), item.get("error")) {
                (_, Some(e)) if !e.is_null() => {
                    Err(NodeError(format!("node error: {}", e.get("message").and_then(|m| m.as_str()).unwrap_or("unknown"))))
                }
                (Some(r), _) => Ok(r.clone()),
                _ => Err(NodeError("answer without result".into())),
            };
        }
        Ok(out)
    }

    /// One POST; the answer's body when its status is 2xx. Every call only reads, so a connection that fails (a
    /// kept-alive one the node closed while it idled) is tried once more on a fresh one.
    fn post(&self, body: &[u8]) -> Result<Vec<u8>, NodeError> {
        match self.exchange(body) {
            Err(ureq::Error::Io(_)) | Err(ureq::Error::ConnectionFailed) => self.exchange(body),
            other => other,
        }
        .map_err(|e| self.redacted(e))
    }

    fn exchange(&self, body: &[u8]) -> Result<Vec<u8>, ureq::Error> {
        let mut req = self.agent.post(&self.url).header("content-type", "application/json");
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        let mut res = req.send(body)?;
        let status = res.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(ureq::Error::StatusCode(status));
        }
        res.body_mut().with_config().limit(MAX_ANSWER_BYTES).read_to_vec()
    }

    /// What went wrong, in words that carry neither the URL nor the host.
    fn redacted(&self, e: ureq::Error) -> NodeError {
        let what = match e {
            ureq::Error::StatusCode(s) => format!("node answered HTTP {s}"),
            ureq::Error::Timeout(_) => "node timed out".to_string(),
            ureq::Error::HostNotFound => "node host not found".to_string(),
            ureq::Error::ConnectionFailed => "node unreachable".to_string(),
            ureq::Error::BodyExceedsLimit(_) => format!("node answer over {} MiB", MAX_ANSWER_BYTES >> 20),
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => format!("node TLS failed: {}", tls_hint(&io.to_string())),
            ureq::Error::Io(io) => format!("node unreachable: {}", io.kind()),
            ureq::Error::Rustls(t) => format!("node TLS failed: {}", tls_hint(&t.to_string())),
            ureq::Error::Tls(t) => format!("node TLS failed: {t}"),
            ureq::Error::BadUri(_) | ureq::Error::Http(_) => "node URL not usable".to_string(),
            other => format!("node call failed: {other}"),
        };
        NodeError(if self.host.is_empty() { what } else { what.replace(&self.host, "<node host>") })
    }
}

/// A certificate the roots do not vouch for says what to do about it.
fn tls_hint(msg: &str) -> String {
    if msg.contains("UnknownIssuer") || msg.contains("BadSignature") {
        format!("{msg} (the node's certificate is not signed by a trusted CA: give the engine the node's CA)")
    } else {
        msg.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials_to_a_basic_header() {
        let cases: &[(&str, &str, &str, Option<&str>)] = &[
            ("http://127.0.0.1:8545", "http://127.0.0.1:8545", "127.0.0.1", None),
            ("HTTPS://node.example/v2/key?x=1", "https://node.example/v2/key?x=1", "node.example", None),
            ("https://us%40r:p%3Ass@node.example:443/k", "https://node.example:443/k", "node.example", Some("us@r:p:ss")),
            ("http://user@[::1]:8545/", "http://[::1]:8545/", "::1", Some("user:")),
        ];
        for (url, want, host, creds) in cases {
            let (u, h, c) = split_url(url).unwrap();
            assert_eq!((u.as_str(), h.as_str(), c.as_deref()), (*want, *host, *creds), "{url}");
        }
        assert!(split_url("ws://node.example").unwrap_err().0.contains("http"));
        assert!(split_url("node.example:8545").is_err());
    }

    #[test]
    fn an_authorization_header_wins_over_the_url_credentials() {
        let c = NodeClient::with(
            "http://a:b@127.0.0.1:9/",
            NodeOptions { timeout_ms: 100, headers: vec![("Authorization".into(), "Bearer t".into()), ("x-k".into(), "v".into())], ca_pem: None },
        )
        .unwrap();
        let seen = |c: &NodeClient| c.headers.iter().map(|(k, v)| format!("{k}: {}", v.to_str().unwrap())).collect::<Vec<_>>();
        assert_eq!(seen(&c), ["authorization: Bearer t", "x-k: v"]);
        assert_eq!(seen(&NodeClient::new("http://a:b@127.0.0.1:9/", 100).unwrap()), ["authorization: Basic YTpi"]);
        let bad = NodeOptions { timeout_ms: 100, headers: vec![("bad name".into(), "v".into())], ca_pem: None };
        assert!(NodeClient::with("http://127.0.0.1:9/", bad).is_err());
    }

    #[test]
    fn an_unreachable_node_is_an_error_without_its_url() {
        let c = NodeClient::new("http://secret:pw@127.0.0.1:9/key123", 500).unwrap();
        let e = c.call("eth_chainId", json!([])).unwrap_err().0;
        assert!(e.starts_with("node unreachable"), "{e}");
        assert!(!e.contains("secret") && !e.contains("key123") && !e.contains("127.0.0.1"), "{e}");
        assert_eq!(c.reads(), 1);
    }

    #[test]
    fn a_ca_without_certificates_is_refused() {
        let o = NodeOptions { timeout_ms: 100, headers: Vec::new(), ca_pem: Some("not a pem".into()) };
        assert!(NodeClient::with("https://127.0.0.1:9/", o).is_err());
    }
}
