// Relay tier end to end: daemon B (--upstream-resume) takes daemon A's /flashblocks through a TCP relay that is
// killed and restarted while frames flow; B must end with every flashblock, in order, each applied once.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { generateStream } from '../../bench/flashblock-gen.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/log.js';
import { startReplayServer } from '../helpers/replay-server.js';

/** A TCP relay on 127.0.0.1 to `targetPort` that can be killed (every connection destroyed) and started again. */
class TcpRelay {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;
  constructor(private readonly targetPort: number) {}

  async start(): Promise<void> {
    const server = createServer((client) => {
      const up = connect(this.targetPort, '127.0.0.1');
      for (const s of [client, up]) {
        this.sockets.add(s);
        s.on('error', () => {
          client.destroy();
          up.destroy();
        });
        s.on('close', () => this.sockets.delete(s));
      }
      client.pipe(up);
      up.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /** Drops every connection without a close frame and stops listening (connects are refused until start()). */
  async kill(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = null;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const daemonArgs = ['--port', '0', '--metrics-port', '0', '--execution', 'false', '--backoff-initial-ms', '20', '--backoff-max-ms', '100'];

t.test('a relay with --upstream-resume ends with every flashblock, none applied twice, after its upstream link drops mid-stream', async (t) => {
  const stream = generateStream({ firstBlock: 5000, blocks: 24, flashblocksPerBlock: 10, txs: (i) => i % 3 });
  const frames = stream.map((f) => JSON.stringify(f.message));
  const source = await startReplayServer();
  t.teardown(() => source.close());
  const a: Daemon = await startDaemon(loadConfig([...daemonArgs, '--flashblocks-url', source.url], {}), { log: silentLogger });
  t.teardown(() => a.stop());
  const relay = new TcpRelay(a.rpcPort);
  await relay.start();
  t.teardown(() => relay.kill());
  const b: Daemon = await startDaemon(
    loadConfig([...daemonArgs, '--upstream-resume', '--flashblocks-url', `ws://127.0.0.1:${relay.port}/flashblocks`], {}),
    { log: silentLogger },
  );
  t.teardown(() => b.stop());

  const applied: string[] = [];
  b.pipeline.events.onApplied((block, fb) => applied.push(`${block.number}-${fb.index}`));
  await source.waitForClients(1);
  await until('B subscribed to A', () => a.metrics.streamSubscribers.value === 1);

  const dropAt = 80;
  const restartAt = 150;
  for (let i = 0; i < frames.length; i++) {
    if (i === dropAt) {
      await until('B caught up before the drop', () => applied.length === dropAt);
      await relay.kill();
    }
    if (i === restartAt) await relay.start();
    source.send(frames[i]!);
    await sleep(5);
  }
  await until('B applied the whole stream', () => applied.length >= frames.length);
  await sleep(100); // a late duplicate would show up here

  const expected = stream.map((f) => `${f.blockNumber}-${f.index}`);
  t.same(applied, expected, 'B applied every flashblock once, in order');
  t.equal(a.pipeline.state.pendingBlock()?.nextIndex, 10, 'A holds the last block whole');
  t.ok(b.metrics.forUpstream(0).resumes.requested.value >= 1, 'B reconnected with a resume position');
  t.equal(b.metrics.forUpstream(0).resumes.too_old.value, 0, 'A still held the flashblocks B had missed');
  t.ok(b.metrics.upstreamReconnects[0]!.value >= 1, 'the link really dropped');
  t.equal(b.metrics.sequenceVerdicts.joined_mid_block.value, 0, 'B never joined a block part-way through');
});

t.test('without --upstream-resume the same drop loses the flashblocks sent meanwhile (the test above can fail)', async (t) => {
  const stream = generateStream({ firstBlock: 7000, blocks: 6, flashblocksPerBlock: 10, txs: () => 0 });
  const frames = stream.map((f) => JSON.stringify(f.message));
  const source = await startReplayServer();
  t.teardown(() => source.close());
  const a = await startDaemon(loadConfig([...daemonArgs, '--flashblocks-url', source.url], {}), { log: silentLogger });
  t.teardown(() => a.stop());
  const relay = new TcpRelay(a.rpcPort);
  await relay.start();
  t.teardown(() => relay.kill());
  const b = await startDaemon(loadConfig([...daemonArgs, '--flashblocks-url', `ws://127.0.0.1:${relay.port}/flashblocks`], {}), { log: silentLogger });
  t.teardown(() => b.stop());
  const applied: string[] = [];
  b.pipeline.events.onApplied((block, fb) => applied.push(`${block.number}-${fb.index}`));
  await source.waitForClients(1);
  await until('B subscribed to A', () => a.metrics.streamSubscribers.value === 1);
  for (let i = 0; i < frames.length; i++) {
    if (i === 15) {
      await until('B caught up before the drop', () => applied.length === 15);
      await relay.kill();
    }
    if (i === 35) {
      await relay.start();
      await until('B back on A', () => a.metrics.streamSubscribers.value === 1);
    }
    source.send(frames[i]!);
    await sleep(5);
  }
  await until('the last flashblock reached B', () => applied.at(-1) === `${stream.at(-1)!.blockNumber}-${stream.at(-1)!.index}`);
  t.ok(applied.length < frames.length, `B missed flashblocks (${frames.length - applied.length})`);
  t.equal(b.metrics.forUpstream(0).resumes.requested.value, 0, 'no resume position was sent');
});
