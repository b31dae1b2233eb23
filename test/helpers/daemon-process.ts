// Test helper: the daemon as a real child process (the source through tsx, or the single-file binary), with its
// JSON log lines collected and its ports read from the "listening" line. Owns the child; kills it on close().
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface DaemonProcess {
  proc: ChildProcess;
  /** `http://127.0.0.1:<rpc port>/` */
  rpcUrl: string;
  rpcPort: number;
  metricsPort: number;
  /** Parsed JSON log lines so far (stdout). */
  logs(): Record<string, unknown>[];
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILLs the process if it still runs and waits for it. */
  close(): Promise<void>;
}

/** The repository root (cwd for running the source). */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** argv that runs src/main.ts from source under this node (tsx loader). */
export function sourceCommand(): string[] {
  return [process.execPath, '--import', 'tsx', fileURLToPath(new URL('../../src/main.ts', import.meta.url))];
}

/**
 * Spawns `command` + `args` (ports should be 0) and resolves once the daemon logged that it listens. Rejects with
 * its output when it exits first or does not listen within `startTimeoutMs`.
 */
export async function spawnDaemon(
  command: string[],
  args: string[],
  /** `detached`: its own process group, so a test can signal the group as a terminal's Ctrl-C does (kill(-pid)). */
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; startTimeoutMs?: number; detached?: boolean } = {},
): Promise<DaemonProcess> {
  const [file, ...pre] = command as [string, ...string[]];
  const proc = spawn(file, [...pre, ...args], { cwd: opts.cwd ?? repoRoot, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false });
  const lines: Record<string, unknown>[] = [];
  let err = '';
  let partial = '';
  let onLine: ((l: Record<string, unknown>) => void) | null = null;
  proc.stdout!.on('data', (d: Buffer) => {
    partial += d.toString('utf8');
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const text = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try {
        const line = JSON.parse(text) as Record<string, unknown>;
        lines.push(line);
        onLine?.(line);
      } catch {
        lines.push({ raw: text });
      }
    }
  });
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  const output = (): string => lines.map((l) => JSON.stringify(l)).join('\n') + '\n' + err;

  const listening = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`daemon did not listen within ${opts.startTimeoutMs ?? 30000} ms:\n${output()}`));
    }, opts.startTimeoutMs ?? 30000);
    const found = lines.find((l) => typeof l.rpcPort === 'number');
    if (found !== undefined) {
      clearTimeout(timer);
      resolve(found);
      return;
    }
    onLine = (l) => {
      if (typeof l.rpcPort === 'number') {
        clearTimeout(timer);
        resolve(l);
      }
    };
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited (${code ?? signal}) before listening:\n${output()}`));
    });
  });
  onLine = null;
  const rpcPort = listening.rpcPort as number;
  return {
    proc,
    rpcUrl: `http://127.0.0.1:${rpcPort}/`,
    rpcPort,
    metricsPort: listening.metricsPort as number,
    logs: () => lines,
    stderr: () => err,
    exited,
    async close() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}
