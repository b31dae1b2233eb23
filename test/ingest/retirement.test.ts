// The retirement watch: a retired preset is judged at once, silence only after --upstream-absent-ms, a frame ends
// either verdict, and nothing is said twice.
import t from 'tap';
import { BASE_DENIM_MAINNET_SEC, presetByName } from '../../src/chain/presets.js';
import { Backoff } from '../../src/ingest/backoff.js';
import { RetirementWatch } from '../../src/ingest/retirement.js';

const base = presetByName('base');
const unichain = presetByName('unichain');
const AFTER_DENIM_MS = (BASE_DENIM_MAINNET_SEC + 86_400) * 1000;

t.test('a retired chain is judged on the first check, once', async (t) => {
  const w = new RetirementWatch({ preset: base, absentMs: 600_000, backoffMaxMs: 5000 }, AFTER_DENIM_MS);
  const c = w.check(AFTER_DENIM_MS);
  t.equal(c?.kind, 'entered');
  t.equal(w.retirement?.reason, 'chain_retired');
  t.equal(w.retirement?.sinceUnixMs, BASE_DENIM_MAINNET_SEC * 1000);
  t.match(w.retirement?.message ?? '', /^Base \(chain 8453\) retired flashblocks on 2026-11-05 18:00 UTC: .*pending answers as latest, reconnects now wait 5000 ms \(--backoff-max-ms\)\. What to do: Base's guidance: `pending` has no equivalent any more/);
  t.equal(w.check(AFTER_DENIM_MS + 1000), null, 'not said again');
  t.equal(w.check(AFTER_DENIM_MS + 10_000_000), null, 'not even after the absence threshold');
});

t.test('before Denim, Base streamed', async (t) => {
  const before = (BASE_DENIM_MAINNET_SEC - 1) * 1000;
  const w = new RetirementWatch({ preset: base, absentMs: 0, backoffMaxMs: 5000 }, before);
  t.equal(w.check(before), null);
});

t.test('silence for the threshold is an absent upstream; a frame before it resets the clock', async (t) => {
  const w = new RetirementWatch({ preset: unichain, absentMs: 600_000, backoffMaxMs: 5000 }, 0);
  t.equal(w.check(599_999), null, 'one ms short');
  t.equal(w.frame(500_000), null, 'a frame while streaming changes nothing');
  t.equal(w.check(1_099_999), null, 'the clock restarted at the frame');
  const c = w.check(1_100_000);
  t.equal(c?.kind, 'entered');
  t.equal(w.retirement?.reason, 'upstream_absent');
  t.equal(w.retirement?.sinceUnixMs, 500_000);
  t.match(w.retirement?.message ?? '', /^no flashblock from any upstream for 600 s \(since 1970-01-01T00:08:20\.000Z\): .*--flashblocks-enabled false/);
  t.equal(w.check(2_000_000), null, 'said once');
});

t.test('a frame ends the verdict; a retired preset is not judged again once frames flowed', async (t) => {
  const w = new RetirementWatch({ preset: base, absentMs: 60_000, backoffMaxMs: 5000 }, AFTER_DENIM_MS);
  w.check(AFTER_DENIM_MS);
  const left = w.frame(AFTER_DENIM_MS + 10);
  t.equal(left?.kind, 'left');
  t.equal(left?.kind === 'left' ? left.after.reason : '', 'chain_retired');
  t.equal(w.retirement, null);
  t.equal(w.check(AFTER_DENIM_MS + 20), null, 'someone streams: no flapping back to chain_retired');
  t.equal(w.check(AFTER_DENIM_MS + 10 + 60_000)?.kind, 'entered', 'silence still counts');
  t.equal(w.retirement?.reason, 'upstream_absent');
});

t.test('absentMs 0 never concludes from silence', async (t) => {
  const w = new RetirementWatch({ preset: null, absentMs: 0, backoffMaxMs: 5000 }, 0);
  t.equal(w.check(1e12), null);
});

t.test('a settled backoff waits between 0.9 × and 1 × the cap from the first failure', async (t) => {
  const b = new Backoff(100, 5000);
  b.settled = true;
  const delays = Array.from({ length: 200 }, () => b.fail());
  t.ok(Math.min(...delays) >= 4500 && Math.max(...delays) <= 5000, `200 delays within [4500, 5000] ms: ${Math.min(...delays)}…${Math.max(...delays)}`);
  b.settled = false;
  b.reset();
  t.ok(b.fail() <= 500, 'unsettled: quick again');
});
