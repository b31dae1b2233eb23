//! The engine's failures: an apply's (EngineError, whose code the TypeScript side reads from a rejection's
//! `CODE: message`) and a read's (ReadError: a stable code mapped to a JSON-RPC error in src/exec/addon.ts).
use crate::state::DbError;

/// An engine failure with a stable code for the TypeScript side.
#[derive(Debug)]
pub struct EngineError {
    pub code: &'static str,
    pub message: String,
}

impl EngineError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

impl From<DbError> for EngineError {
    fn from(e: DbError) -> Self {
        EngineError::new("E_NODE", e.0)
    }
}

/// A read's failure: a stable code the TypeScript side maps to a JSON-RPC error (src/exec/addon.ts rpcCodeOf: E_INPUT
/// invalid params, E_UNSUPPORTED method not found, E_REVERT 3 with the revert data, E_TOO_LARGE limit exceeded,
/// E_SIM_* eth_simulateV1's own codes; E_TIMEOUT, E_FAILED, E_NODE and the rest -32000), its message, and data for a
/// revert.
#[derive(Debug)]
pub struct ReadError {
    pub code: &'static str,
    pub message: String,
    pub data: Option<String>,
}

pub(crate) fn invalid(message: impl Into<String>) -> ReadError {
    ReadError { code: "E_INPUT", message: message.into(), data: None }
}

pub(crate) fn failed(message: impl Into<String>) -> ReadError {
    ReadError { code: "E_FAILED", message: message.into(), data: None }
}

impl From<EngineError> for ReadError {
    fn from(e: EngineError) -> Self {
        ReadError { code: if e.code == "E_INPUT" { "E_INPUT" } else { "E_FAILED" }, message: e.message, data: None }
    }
}
impl From<DbError> for ReadError {
    fn from(e: DbError) -> Self {
        ReadError { code: "E_NODE", message: e.0, data: None }
    }
}
