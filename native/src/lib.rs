//! flashblocksd's native core (N-API): an OP-stack EVM (op-revm) that keeps the pending block open and executes each
//! flashblock's new transactions on it, with a state cache over the node that survives blocks; and the stream's frame
//! decoding and sender recovery for ingest. One module per phase; the N-API face of the engine is engine.rs, the
//! frame's is frame/.
#![deny(clippy::all)]

/// The N-API engine: its threads, the open blocks, the published heads.
pub mod engine;
/// Executing a flashblock on the open block.
pub mod apply;
/// Calls at a snapshot (eth_call, estimateGas, createAccessList) and their overrides.
pub mod call;
/// Reads at a snapshot, by method.
pub mod read;
/// eth_simulateV1 at a snapshot.
pub mod simulate;
/// debug_trace* / trace_* at an executed flashblock.
pub mod trace;
/// Transactions as the engine takes them, decoded, senders given or recovered.
pub mod tx;
/// The pending block's env and fork; the engine's JSON inputs.
pub mod spec;
/// Executed receipts and their root.
pub mod receipt;
/// The Merkle-Patricia root of an ordered list, cached as it grows.
pub mod root;
/// The engine's failures.
pub mod error;
/// The EVM every execution builds (op-revm with the chain's precompiles).
pub mod evm;
/// State: layers over the node's canonical state, its cache.
pub mod state;
/// A block's post-state diff.
pub mod changes;
/// The engine's node client.
pub mod node;
/// Frame decoding and sender recovery for ingest (src/ingest/native-frame.ts).
pub mod frame;
#[cfg(test)]
mod stubnode;
