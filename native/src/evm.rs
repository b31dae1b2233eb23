//! The EVM the engine builds: op-revm's, with the precompile set of the chain's fork. op-revm's own set is used as it
//! is, except where op-revm 20.0.0 lags the chain: Karst caps the BN254 pairing (0x08) input at 57,600 bytes (300
//! pairs; op-revm keeps Jovian's 81,984). Every execution (flashblocks, system calls, reads, simulations) builds its
//! EVM here, so no path runs another set.
use op_revm::precompiles::{karst, OpPrecompiles};
use op_revm::revm::{
    context::{BlockEnv, Cfg, CfgEnv, Context},
    context_interface::ContextTr,
    handler::{instructions::EthInstructions, EthPrecompiles, PrecompileProvider},
    interpreter::{interpreter::EthInterpreter, CallInputs, InterpreterResult},
    precompile::{
        bn254::{self, pair::ISTANBUL_PAIR_BASE, pair::ISTANBUL_PAIR_PER_POINT},
        call_eth_precompile, EthPrecompileResult, Precompile, PrecompileHalt, PrecompileId, PrecompileResult, Precompiles,
    },
    primitives::{hardfork::SpecId, Address, OnceLock},
    Database,
};
use op_revm::{DefaultOp, L1BlockInfo, OpContext, OpEvm, OpSpecId};

/// Karst's cap on the BN254 pairing input: 300 pairs of 192 bytes.
pub const KARST_PAIR_MAX_INPUT_BYTES: usize = 57_600;

/// The pairing under Karst: Jovian's gas and semantics, a smaller cap. An input above it fails the precompile (all
/// the call's gas consumed), as op-revm fails Jovian's cap.
fn run_pair_karst(input: &[u8], gas_limit: u64) -> EthPrecompileResult {
    if input.len() > KARST_PAIR_MAX_INPUT_BYTES {
        return Err(PrecompileHalt::Bn254PairLength);
    }
    bn254::run_pair(input, ISTANBUL_PAIR_PER_POINT, ISTANBUL_PAIR_BASE, gas_limit)
}

fn karst_pair(input: &[u8], gas_limit: u64, reservoir: u64) -> PrecompileResult {
    Ok(call_eth_precompile(run_pair_karst, input, gas_limit, reservoir))
}

/// The BN254 pairing precompile with Karst's input cap.
pub const KARST_PAIR: Precompile = Precompile::new(PrecompileId::Bn254Pairing, bn254::pair::ADDRESS, karst_pair);

/// Karst's precompiles: op-revm's Karst set (Osaka's MODEXP and P256VERIFY, Jovian's caps) with the pairing capped.
pub fn karst_precompiles() -> &'static Precompiles {
    static SET: OnceLock<Precompiles> = OnceLock::new();
    SET.get_or_init(|| {
        let mut set = karst().clone();
        set.extend([KARST_PAIR]);
        set
    })
}

/// The precompile set of an OP spec: op-revm's, with Karst's pairing cap from Karst on.
pub fn precompiles_of(spec: OpSpecId) -> &'static Precompiles {
    if spec >= OpSpecId::KARST {
        karst_precompiles()
    } else {
        OpPrecompiles::new_with_spec(spec).precompiles()
    }
}

/// The engine's precompile provider: [`precompiles_of`] the spec in force.
#[derive(Debug, Clone)]
pub struct EnginePrecompiles {
    inner: EthPrecompiles,
    spec: OpSpecId,
}

impl EnginePrecompiles {
    pub fn new_with_spec(spec: OpSpecId) -> Self {
        // The inner provider's eth spec is unused: `set_spec` below replaces the whole set on an OP spec change.
        Self { inner: EthPrecompiles { precompiles: precompiles_of(spec), spec: SpecId::default() }, spec }
    }
}

impl<CTX> PrecompileProvider<CTX> for EnginePrecompiles
where
    CTX: ContextTr<Cfg: Cfg<Spec = OpSpecId>>,
{
    type Output = InterpreterResult;

    fn set_spec(&mut self, spec: OpSpecId) -> bool {
        if spec == self.spec {
            return false;
        }
        *self = Self::new_with_spec(spec);
        true
    }

    fn run(&mut self, context: &mut CTX, inputs: &CallInputs) -> Result<Option<InterpreterResult>, String> {
        <EthPrecompiles as PrecompileProvider<CTX>>::run(&mut self.inner, context, inputs)
    }

    fn warm_addresses(&self) -> Box<impl Iterator<Item = Address>> {
        self.inner.warm_addresses()
    }

    fn contains(&self, address: &Address) -> bool {
        self.inner.contains(address)
    }
}

/// The engine's EVM over `DB` (with inspector `INSP`).
pub type EngineEvm<DB, INSP = ()> = OpEvm<OpContext<DB>, INSP, EthInstructions<EthInterpreter, OpContext<DB>>, EnginePrecompiles>;

/// Builds the EVM for one execution: op-revm's, with [`EnginePrecompiles`] of `cfg`'s spec.
pub fn engine_evm<DB: Database, INSP>(db: DB, cfg: CfgEnv<OpSpecId>, block: BlockEnv, chain: L1BlockInfo, inspector: INSP) -> EngineEvm<DB, INSP> {
    let spec = cfg.spec;
    let evm = OpEvm::new(Context::op().with_db(db).with_block(block).with_cfg(cfg).with_chain(chain), inspector);
    evm.with_precompiles(EnginePrecompiles::new_with_spec(spec))
}

#[cfg(test)]
mod tests {
    //! The pairing cap through a whole transaction to 0x08, per spec, on a state served by a loopback node.
    use super::*;
    use crate::spec::BlockSpec;
    use crate::node::NodeClient;
    use crate::state::{Db, Shared};
    use crate::stubnode::{StubAccount, StubNode};
    use op_revm::revm::{
        context::TxEnv,
        context_interface::result::{ExecutionResult, HaltReason},
        primitives::{Bytes, TxKind, U256},
        ExecuteEvm,
    };
    use op_revm::{OpHaltReason, OpTransaction};

    const GAS: u64 = 16_000_000;

    /// A transaction to the pairing precompile with `pairs` pairs (all points at infinity: a valid input, true).
    fn pairing(spec: OpSpecId, pairs: usize) -> ExecutionResult<OpHaltReason> {
        let sender = Address::with_last_byte(1);
        let node = StubNode::start([(sender, StubAccount { balance: U256::from(10u128.pow(21)), ..Default::default() })].into_iter().collect());
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let block = BlockSpec { spec, ..BlockSpec::for_tests() };
        let tx = TxEnv {
            tx_type: 2,
            caller: sender,
            gas_limit: GAS,
            gas_price: 10,
            gas_priority_fee: Some(1),
            chain_id: Some(901),
            kind: TxKind::Call(bn254::pair::ADDRESS),
            data: Bytes::from(vec![0u8; 192 * pairs]),
            ..Default::default()
        };
        let db = op_revm::revm::database::WrapDatabaseRef(Db { top: None, below: &[], shared: &shared });
        let mut evm = engine_evm(db, block.cfg(), block.block_env(), L1BlockInfo::default(), ());
        evm.transact(OpTransaction { base: tx, enveloped_tx: Some(Bytes::new()), deposit: Default::default() }).expect("the transaction is valid").result
    }

    fn assert_accepted(spec: OpSpecId, pairs: usize) {
        match pairing(spec, pairs) {
            ExecutionResult::Success { output, .. } => assert_eq!(output.data().as_ref(), U256::from(1).to_be_bytes::<32>().as_slice(), "{spec:?} {pairs} pairs"),
            other => panic!("{spec:?} {pairs} pairs: {other:?}"),
        }
    }

    fn assert_rejected(spec: OpSpecId, pairs: usize) {
        let r = pairing(spec, pairs);
        let refused = |reason: &OpHaltReason| matches!(reason, OpHaltReason::Base(HaltReason::PrecompileErrorWithContext(c)) if c == "bn254 invalid pair length");
        assert!(matches!(&r, ExecutionResult::Halt { reason, .. } if refused(reason)), "{spec:?} {pairs} pairs: {r:?}");
        assert_eq!(r.tx_gas_used(), GAS, "all gas consumed");
    }

    #[test]
    fn karst_accepts_300_pairs_and_rejects_301() {
        assert_accepted(OpSpecId::KARST, 300);
        assert_rejected(OpSpecId::KARST, 301);
        assert_rejected(OpSpecId::KARST, 427);
    }

    #[test]
    fn jovian_accepts_301_to_427_pairs_and_rejects_428() {
        assert_accepted(OpSpecId::JOVIAN, 300);
        assert_accepted(OpSpecId::JOVIAN, 301);
        assert_accepted(OpSpecId::JOVIAN, 427);
        assert_rejected(OpSpecId::JOVIAN, 428);
    }

    #[test]
    fn karst_changes_only_the_pairing_of_op_revms_set() {
        let ours = karst_precompiles();
        let theirs = karst();
        let mut a: Vec<&Address> = ours.addresses().collect();
        let mut b: Vec<&Address> = theirs.addresses().collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert!(std::ptr::eq(precompiles_of(OpSpecId::JOVIAN), op_revm::precompiles::jovian()));
    }
}
