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
/// invalid params, E_UNSUPPORTED method not found, E_REVERT 3 with the revert data, E_TOO_LARGE limit exceeded;
/// eth_simulateV1's, as geth's: E_SIM_NONCE_LOW -38010, E_SIM_NONCE_HIGH -38011, E_SIM_FEE_LOW -38012,
/// E_SIM_INTRINSIC_GAS -38013, E_SIM_FUNDS -38014, E_SIM_BLOCK_GAS -38015, E_SIM_NUMBER -38020, E_SIM_TIMESTAMP
/// -38021, E_SIM_NOT_EOA -38024, E_SIM_INITCODE -38025, E_SIM_FEE_PARAMS invalid params, E_SIM_INTERNAL internal
/// error; E_TIMEOUT, E_FAILED, E_NODE and the rest -32000, a call's refusals as a transaction included: E_NONCE_LOW,
/// E_NONCE_HIGH, E_FEE_LOW, E_INTRINSIC_GAS, E_FUNDS, E_BLOCK_GAS, E_NOT_EOA, E_INITCODE, E_FEE_PARAMS, which
/// eth_call answers as geth does and eth_simulateV1 with validation turns into its own), its message, and data for a
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
