//! The node as the engine reads it: JSON-RPC over HTTP/1.1 keep-alive to a plain `http://host:port` endpoint (the
//! daemon's loopback proxy, which holds the node's real URL and credentials). Blocking: it runs on the engine's own
//! threads, never on the JS event loop. Counts every call (the `node reads` metric).
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// A JSON-RPC client for one endpoint, with a small pool of keep-alive connections.
pub struct NodeClient {
    host_port: String,
    path: String,
    pool: Mutex<Vec<BufReader<TcpStream>>>,
    reads: AtomicU64,
    timeout: Duration,
}

/// Why a node call failed; the message never carries the URL.
#[derive(Debug, Clone)]
pub struct NodeError(pub String);

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl NodeClient {
    /// `url` must be `http://host:port[/path]` (no TLS, no credentials: the daemon's proxy adds those).
    pub fn new(url: &str, timeout_ms: u64) -> Result<Self, NodeError> {
        let rest = url.strip_prefix("http://").ok_or_else(|| NodeError("engine node URL must be http://".into()))?;
        let (host_port, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        Ok(Self {
            host_port: host_port.to_string(),
            path: path.to_string(),
            pool: Mutex::new(Vec::new()),
            reads: AtomicU64::new(0),
            timeout: Duration::from_millis(timeout_ms.max(100)),
        })
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

    fn connect(&self) -> Result<BufReader<TcpStream>, NodeError> {
        let s = TcpStream::connect(&self.host_port).map_err(|e| NodeError(format!("node unreachable: {}", e.kind())))?;
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(self.timeout)).ok();
        s.set_write_timeout(Some(self.timeout)).ok();
        Ok(BufReader::new(s))
    }

    fn post(&self, body: &[u8]) -> Result<Vec<u8>, NodeError> {
        // A pooled connection may have been closed by the server while idle: retry once on a fresh one.
        let pooled = self.pool.lock().map(|mut p| p.pop()).unwrap_or(None);
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        match self.exchange(&mut conn, body) {
            Ok((answer, keep)) => {
                if keep {
                    if let Ok(mut p) = self.pool.lock() {
                        if p.len() < 16 {
                            p.push(conn);
                        }
                    }
                }
                Ok(answer)
            }
            Err(_) if reused => {
                let mut fresh = self.connect()?;
                let (answer, keep) = self.exchange(&mut fresh, body)?;
                if keep {
                    if let Ok(mut p) = self.pool.lock() {
                        p.push(fresh);
                    }
                }
                Ok(answer)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes one request and reads one response (Content-Length or chunked). Returns the body and whether the
    /// connection may be reused.
    fn exchange(&self, conn: &mut BufReader<TcpStream>, body: &[u8]) -> Result<(Vec<u8>, bool), NodeError> {
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
            self.path,
            self.host_port,
            body.len()
        );
        let io = |e: std::io::Error| NodeError(format!("node connection failed: {}", e.kind()));
        {
            let s = conn.get_mut();
            s.write_all(head.as_bytes()).map_err(io)?;
            s.write_all(body).map_err(io)?;
        }
        let mut line = String::new();
        if conn.read_line(&mut line).map_err(io)? == 0 {
            return Err(NodeError("node closed the connection".into()));
        }
        let status: u16 = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let mut length: Option<usize> = None;
        let mut chunked = false;
        let mut keep = true;
        loop {
            line.clear();
            if conn.read_line(&mut line).map_err(io)? == 0 {
                return Err(NodeError("node closed the connection".into()));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                let v = v.trim();
                if k == "content-length" {
                    length = v.parse().ok();
                } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                } else if k == "connection" && v.eq_ignore_ascii_case("close") {
                    keep = false;
                }
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                line.clear();
                conn.read_line(&mut line).map_err(io)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16).map_err(|_| NodeError("bad chunk".into()))?;
                if size == 0 {
                    line.clear();
                    conn.read_line(&mut line).map_err(io)?;
                    break;
                }
                let start = out.len();
                out.resize(start + size, 0);
                conn.read_exact(&mut out[start..]).map_err(io)?;
                let mut crlf = [0u8; 2];
                conn.read_exact(&mut crlf).map_err(io)?;
            }
        } else if let Some(n) = length {
            out.resize(n, 0);
            conn.read_exact(&mut out).map_err(io)?;
        } else {
            conn.read_to_end(&mut out).map_err(io)?;
            keep = false;
        }
        if status != 200 {
            return Err(NodeError(format!("node answered HTTP {status}")));
        }
        Ok((out, keep))
    }
}
