// `npm start` with no flags runs the embedded devnet in the daemon's process; when the devnet's anvil dies (killed
// here with SIGKILL, as the OOM killer would), flashblocksd stops with one error line naming it and exit code 1,
// with no stack trace and no crash.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';

const { NODE_OPTIONS: _tapLoaders, ...childEnv } = process.env;

/** The pids of `pid`'s children (from /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

const commOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};

t.test("the embedded devnet's anvil killed: flashblocksd says so once and exits 1, no stack", async (t) => {
  const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0'], { env: childEnv, startTimeoutMs: 60_000 });
  t.teardown(() => d.close());
  const anvil = childrenOf(d.proc.pid!).filter((p) => commOf(p) === 'anvil');
  t.equal(anvil.length, 1, "the daemon's child anvil");
  const before = d.logs().length;
  process.kill(anvil[0]!, 'SIGKILL');
  const exit = await d.exited;
  t.same(exit, { code: 1, signal: null }, 'exit code 1');
  const after = d.logs().slice(before);
  const errors = after.filter((l) => l.level === 'error' || l.level === 'fatal' || l.raw !== undefined);
  t.same(errors.map((l) => l.msg), [
    `the embedded devnet stopped: anvil (pid ${anvil[0]}) exited (signal SIGKILL); flashblocksd stops with it (exit code 1): start it again with npm start`,
  ], 'one error line naming anvil and what to do');
  t.notMatch(d.stderr(), /\n\s+at |fatal|Unhandled|Error:/, 'no stack trace or crash on stderr');
});
