//! Tests only: a JSON-RPC node on 127.0.0.1 serving a fixed pre-state, as a witness-backed node does — an account
//! may lack its code bytes (eth_getCode answers an error, eth_getProof its code hash). Real HTTP, real sockets; never
//! part of the addon.
use alloy_primitives::{hex, keccak256, Address, B256, U256};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

/// One account of the stub's state. `code: None` with a `code_hash`: the witness lacks the bytes.
#[derive(Clone, Default)]
pub struct StubAccount {
    pub balance: U256,
    pub nonce: u64,
    pub code: Option<Vec<u8>>,
    pub code_hash: Option<B256>,
    /// Not in the witness at all: every read of it is an error.
    pub missing: bool,
    /// Slots not in the witness.
    pub missing_slots: Vec<U256>,
    /// Slots that are not zero.
    pub storage: Vec<(U256, U256)>,
}

/// The stub's state and the calls it answered, by method.
#[derive(Default)]
pub struct StubState {
    pub accounts: HashMap<Address, StubAccount>,
    pub calls: HashMap<String, usize>,
}

/// A running stub: its URL and state (the thread ends with the test process).
pub struct StubNode {
    pub url: String,
    pub state: Arc<Mutex<StubState>>,
}

impl StubNode {
    pub fn start(accounts: HashMap<Address, StubAccount>) -> StubNode {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(StubState { accounts, calls: HashMap::new() }));
        let shared = state.clone();
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let s = shared.clone();
                thread::spawn(move || serve(conn, s));
            }
        });
        StubNode { url, state }
    }

    /// How many times `method` was called.
    pub fn calls(&self, method: &str) -> usize {
        self.state.lock().unwrap().calls.get(method).copied().unwrap_or(0)
    }
}

fn serve(conn: TcpStream, state: Arc<Mutex<StubState>>) {
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = match req {
            Value::Array(items) => Value::Array(items.iter().map(|i| answer(i, &state)).collect()),
            one => answer(&one, &state),
        };
        let out = answer.to_string();
        let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", out.len());
        let s = r.get_mut();
        if s.write_all(head.as_bytes()).and_then(|_| s.write_all(out.as_bytes())).is_err() {
            return;
        }
    }
}

fn answer(req: &Value, state: &Mutex<StubState>) -> Value {
    let id = req["id"].clone();
    let method = req["method"].as_str().unwrap_or("");
    let params = &req["params"];
    let mut st = state.lock().unwrap();
    *st.calls.entry(method.to_string()).or_default() += 1;
    let account = params[0].as_str().and_then(|a| a.parse::<Address>().ok()).map(|a| st.accounts.get(&a).cloned().unwrap_or_default());
    let missing = |a: &StubAccount| a.missing || (method == "eth_getStorageAt" && params[1].as_str().and_then(|k| U256::from_str_radix(k.trim_start_matches("0x"), 16).ok()).is_some_and(|k| a.missing_slots.contains(&k)));
    if account.as_ref().is_some_and(missing) {
        return json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "trie node not in the witness"}});
    }
    let result = match (method, account) {
        ("eth_getBalance", Some(a)) => json!(format!("{:#x}", a.balance)),
        ("eth_getTransactionCount", Some(a)) => json!(format!("{:#x}", a.nonce)),
        ("eth_getCode", Some(a)) => match (&a.code, a.code_hash) {
            (Some(c), _) => json!(format!("0x{}", hex::encode(c))),
            (None, Some(h)) => return json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": format!("code {h:#x} not in the witness")}}),
            (None, None) => json!("0x"),
        },
        ("eth_getProof", Some(a)) => {
            let hash = match (&a.code, a.code_hash) {
                (Some(c), _) => keccak256(c),
                (None, Some(h)) => h,
                (None, None) => keccak256([]),
            };
            json!({"balance": format!("{:#x}", a.balance), "nonce": format!("{:#x}", a.nonce), "codeHash": format!("{hash:#x}"), "storageHash": format!("{:#x}", B256::ZERO), "accountProof": [], "storageProof": []})
        }
        ("eth_getStorageAt", Some(a)) => {
            let k = params[1].as_str().and_then(|k| U256::from_str_radix(k.trim_start_matches("0x"), 16).ok()).unwrap_or_default();
            json!(format!("{:#x}", B256::from(a.storage.iter().find(|(s, _)| *s == k).map_or(U256::ZERO, |(_, v)| *v))))
        }
        _ => return json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("{method} not served")}}),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}
