#!/usr/bin/env bash
# CI: build the single-file binary, run it from an empty temp directory (no node_modules) against a replayed
# flashblocks stream and a real anvil (test/ops/binary.test.ts on this build: eth_blockNumber("pending") must be the replayed
# pending height; with the devnet, the embedded native core executes: /readyz ready, pending eth_call from executed
# state; a build without the core is not ready and says why; test/cli/unit.test.ts: `flashblocksd unit` from an empty
# directory prints the embedded unit with ExecStart= the binary's own path, systemd-analyze verify accepts it, and
# `setup` prints that as the install step), then print its size and start-up time (exec →
# /healthz answering: the first start, which extracts the addons and the native core, and the median of 5 more).
# Exits non-zero on any failure. Run after `npm ci`.
set -euo pipefail
cd "$(dirname "$0")/.."

npm run --silent build:binary
bin="$PWD/dist-bin/flashblocksd"

FLASHBLOCKSD_BINARY="$bin" npx tap --disable-coverage test/ops/binary.test.ts test/cli/unit.test.ts

# Start-up time: the binary copied alone into an empty directory, flashblocks off, node at a closed port.
node --input-type=module - "$bin" <<'EOF'
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const src = process.argv[2];
const dir = mkdtempSync(join(tmpdir(), 'flashblocksd-ci-'));
const bin = join(dir, 'flashblocksd');
copyFileSync(src, bin);
// Two distinct free ports: both listeners are open at once (two sequential probes may return the same port, and the
// daemon then exits 2 with E_LISTEN / E_CONFIG).
const listen = () => new Promise((resolve) => { const s = createServer().listen(0, '127.0.0.1', () => resolve(s)); });
const freePorts = async () => {
  const a = await listen();
  const b = await listen();
  const ports = [a.address().port, b.address().port];
  await Promise.all([a, b].map((s) => new Promise((r) => s.close(r))));
  return ports;
};
const env = { PATH: process.env.PATH, HOME: dir, XDG_RUNTIME_DIR: dir };
const runs = [];
try {
  for (let i = 0; i < 6; i++) {
    const [port, metricsPort] = await freePorts();
    const t0 = performance.now();
    const child = spawn(bin, ['--port', String(port), '--metrics-port', String(metricsPort), '--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:9/', '--log-level', 'error'], { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c) => { stderr += c; });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    for (;;) {
      if (child.exitCode !== null) throw new Error(`start ${i + 1}: the binary exited with ${child.exitCode} before /healthz answered: ${stderr.trim()}`);
      try {
        if ((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status === 200) break;
      } catch {}
      await new Promise((r) => setTimeout(r, 2));
    }
    runs.push(performance.now() - t0);
    child.kill('SIGTERM');
    const code = await exited;
    if (code !== 0) throw new Error(`the binary exited with ${code} after SIGTERM`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const first = runs.shift();
runs.sort((a, b) => a - b);
const mib = (statSync(src).size / 1024 / 1024).toFixed(1);
console.log(`== binary: ${mib} MiB; start-up (exec → /healthz 200, from an empty dir): first start (extracts) ${first.toFixed(0)} ms; then ${runs.length}x median ${runs[2].toFixed(0)} ms, min ${runs[0].toFixed(0)} ms, max ${runs.at(-1).toFixed(0)} ms`);
EOF
