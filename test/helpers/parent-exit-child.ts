// Child process of test/child.test.ts: loads src/child.ts while its parent is alive, tells the parent (which then
// exits), waits until it has been re-parented, and only then calls onParentExit — as a daemon whose npm was killed
// while it was still starting. Prints "noticed" when onParentExit fires, "missed" if it has not within 20 s.
import { onParentExit } from '../../src/child.js';

const first = process.ppid;
process.send?.('loaded');
process.on('disconnect', () => undefined);
const keep = setTimeout(() => {
  process.stdout.write('missed\n');
  process.exit(1);
}, 20_000);
const wait = setInterval(() => {
  if (process.ppid === first) return;
  clearInterval(wait);
  onParentExit(() => {
    clearTimeout(keep);
    process.stdout.write('noticed\n');
    process.exit(0);
  }, 20);
}, 10);
