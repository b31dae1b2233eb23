// /readyz's judgement (src/metrics/health.ts) from plain inputs: what makes an instance not ready, and what is only
// reported.
import t from 'tap';
import { healthReport, type HealthInputs } from '../../src/metrics/health.js';

const base: HealthInputs = {
  flashblocksEnabled: true,
  upstreamUrls: 1,
  upstreamConnected: 1,
  pendingAgeMs: 100,
  readyMaxAgeMs: 2000,
  nodeEnabled: true,
  nodeOkAgeMs: 50,
  canonicalPollMs: 100,
  nodeHead: 10,
};

t.test('ready with a fresh flashblock, an upstream and the node; an engine starting, restarting or retrying is only reported', async (t) => {
  t.equal(healthReport(base).ready, true);
  for (const phase of ['off', 'starting', 'up', 'restarting', 'down']) {
    const r = healthReport({ ...base, execution: { phase, detail: 'x' } });
    t.equal(r.ready, true, `execution ${phase}`);
    t.equal(r.checks.execution!.ok, phase === 'up' || phase === 'off', `execution check of ${phase}`);
  }
});

t.test('an execution engine that cannot run makes the instance not ready, with the reason', async (t) => {
  const r = healthReport({ ...base, execution: { phase: 'down', detail: 'cannot run: this binary was built without the native core; use --execution false', cannotRun: true } });
  t.equal(r.ready, false);
  t.same(r.checks.execution, { ok: false, detail: 'down: cannot run: this binary was built without the native core; use --execution false' });
  t.equal(r.checks.pending!.ok, true, 'everything else is fine');
});

t.test('an execution engine lagging behind the stream makes the instance not ready, with how far behind', async (t) => {
  const lagging = 'lagging: 9 flashblocks behind (limit 5)';
  const r = healthReport({ ...base, execution: { phase: 'up', detail: 'executed up to 7/3, 9 flashblocks behind', lagging } });
  t.equal(r.ready, false);
  t.same(r.checks.execution, { ok: false, detail: `up: ${lagging}; executed up to 7/3, 9 flashblocks behind` });
  const caughtUp = healthReport({ ...base, execution: { phase: 'up', detail: 'executed up to 7/3, 0 flashblocks behind', lagging: null } });
  t.equal(caughtUp.ready, true, 'caught up again: ready');
  t.equal(caughtUp.checks.execution!.ok, true);
});

t.test('executed state diverging from the chain past its bound makes the instance not ready, with the share', async (t) => {
  const diverging = 'executed state diverges from the chain: 43 of 100 flashblocks in the last 100 (limit 25%)';
  const cases: { name: string; execution: NonNullable<HealthInputs['execution']>; ready: boolean; detail: string }[] = [
    { name: 'past the bound', execution: { phase: 'up', detail: 'executed up to 7/3, 43 divergences', diverging }, ready: false, detail: `up: ${diverging}; executed up to 7/3, 43 divergences` },
    { name: 'past the bound and lagging: both said', execution: { phase: 'up', detail: 'd', diverging, lagging: 'lagging: 9 flashblocks behind (limit 5)' }, ready: false, detail: `up: ${diverging}; lagging: 9 flashblocks behind (limit 5); d` },
    { name: 'within the bound (divergences counted, only reported)', execution: { phase: 'up', detail: 'executed up to 7/3, 3 divergences', diverging: null }, ready: true, detail: 'up: executed up to 7/3, 3 divergences' },
  ];
  for (const c of cases) {
    const r = healthReport({ ...base, execution: c.execution });
    t.equal(r.ready, c.ready, `${c.name}: ready`);
    t.same(r.checks.execution, { ok: c.ready, detail: c.detail }, `${c.name}: the execution check`);
  }
});
