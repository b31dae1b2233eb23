// What a node's EIP-7910 eth_config says about its OP fork: a table of configs (anvil's own answer included) to the
// forks they allow; a fork is named only when one remains, so none of today's levels names one: never a guess.
import t from 'tap';
import { forkFromEthConfig } from '../../src/chain/eth-config.js';

const PRAGUE_SYSTEM = {
  BEACON_ROOTS_ADDRESS: '0x000f3df6d732807ef1319fb7b8bb8522d0beac02',
  CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS: '0x0000bbddc7ce488642fb579f8b00f3a590007251',
  DEPOSIT_CONTRACT_ADDRESS: '0x00000000219ab540356cbb839cbe05303d7705fa',
  HISTORY_STORAGE_ADDRESS: '0x0000f90827f1c53a10cb7a02335b175320002935',
  WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS: '0x00000961ef480eb55e80d19ad83579a64c007002',
};
const CANCUN_PRECOMPILES = { ECREC: '0x0000000000000000000000000000000000000001', KZG_POINT_EVALUATION: '0x000000000000000000000000000000000000000a' };
const config = (systemContracts: object | undefined, precompiles: object = CANCUN_PRECOMPILES) => ({
  current: { activationTime: 0, chainId: '0x1092', forkId: '0x00000000', precompiles, ...(systemContracts === undefined ? {} : { systemContracts }) },
  next: null,
  last: null,
});

t.test('each L1 level eth_config shows leaves several OP forks, and the reason names them', async (t) => {
  const rows: [string, unknown, RegExp][] = [
    // anvil 1.7.1 --optimism --hardfork isthmus answers this (no P256VERIFY although OP has it since Fjord).
    ['Prague-level (anvil isthmus)', config(PRAGUE_SYSTEM), /Prague-level .* isthmus or jovian or karst on an OP chain: it does not say which/],
    ['Cancun-level with P256VERIFY', config({ BEACON_ROOTS_ADDRESS: PRAGUE_SYSTEM.BEACON_ROOTS_ADDRESS }, { ...CANCUN_PRECOMPILES, P256VERIFY: '0x0000000000000000000000000000000000000100' }), /fjord or granite or holocene/],
    ['Cancun-level without P256VERIFY', config({ BEACON_ROOTS_ADDRESS: PRAGUE_SYSTEM.BEACON_ROOTS_ADDRESS }), /ecotone or fjord or granite or holocene/],
    ['pre-Cancun (no systemContracts)', config(undefined), /bedrock or regolith or canyon/],
  ];
  for (const [name, result, why] of rows) {
    const r = forkFromEthConfig(result);
    t.equal(r.ok, false, `${name}: no fork named`);
    if (!r.ok) t.match(r.why, why, name);
  }
});

t.test('an answer that is not an EIP-7910 config is said so', async (t) => {
  for (const bad of [null, 'x', [], {}, { current: null }, { current: [] }]) {
    const r = forkFromEthConfig(bad);
    t.equal(r.ok, false, JSON.stringify(bad));
    if (!r.ok) t.match(r.why, /not an EIP-7910 config/);
  }
});
