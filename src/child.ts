// Spawns child processes that cannot outlive this process, even when it is killed with SIGKILL, and lets this process
// notice that its own parent is gone. Owns nothing else: callers keep their own start/stop logic. A leaf: imports
// only node built-ins.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { accessSync, constants } from 'node:fs';

/** util-linux's setpriv sets PR_SET_PDEATHSIG and then execs the real program (Debian ships it in util-linux). */
const SETPRIV_PATHS = ['/usr/bin/setpriv', '/bin/setpriv'];

let setprivPath: string | null | undefined;

/** Path of setpriv when it is executable here, else null (looked up once). */
export function setpriv(): string | null {
  if (setprivPath !== undefined) return setprivPath;
  setprivPath = null;
  if (process.platform !== 'linux') return setprivPath;
  for (const p of SETPRIV_PATHS) {
    try {
      accessSync(p, constants.X_OK);
      setprivPath = p;
      break;
    } catch {
      // try the next one
    }
  }
  return setprivPath;
}

/** A spawned child and whether the kernel will kill it when this process dies. */
export interface TiedChild {
  readonly child: ChildProcess;
  /** True when the child gets SIGKILL from the kernel if this process dies (setpriv --pdeathsig). */
  readonly tied: boolean;
}

/**
 * Spawns `file args` so that the kernel sends it SIGKILL when this process dies, however it dies (`kill -9`
 * included): on Linux through `setpriv --pdeathsig KILL`, which execs the program in place (same pid, same stdio).
 * Where setpriv is missing the child is spawned plainly and `tied` is false: the caller must then kill it on exit.
 * Call it from the main thread: the death signal follows the thread that forked the child.
 */
export function spawnTied(file: string, args: readonly string[], opts: SpawnOptions = {}): TiedChild {
  const c = tiedCommand(file, args);
  return { child: spawn(c.file, c.args, opts), tied: c.tied };
}

/** A command line rewritten so the program it runs dies with this process (see {@link spawnTied}). */
export interface TiedCommand {
  readonly file: string;
  readonly args: string[];
  readonly tied: boolean;
}

/**
 * `file args` prefixed with `setpriv --pdeathsig KILL --` where setpriv exists, for the spawn functions that cannot
 * go through {@link spawnTied} (execFile, execFileSync, fork's execPath). Unchanged, with `tied` false, elsewhere.
 */
export function tiedCommand(file: string, args: readonly string[]): TiedCommand {
  const sp = setpriv();
  if (sp === null) return { file, args: [...args], tied: false };
  return { file: sp, args: ['--pdeathsig', 'KILL', '--', file, ...args], tied: true };
}

/** The parent this process started with, read as this module loads (with the entry point's first imports). */
const parentAtStart = process.ppid;

/**
 * Calls `onGone` once when this process's parent exits (the process is re-parented: its ppid changes), checking
 * every `intervalMs` on an unref'd timer. For runs whose parent is a wrapper that must not leave us behind
 * (`npm start`): a plain `nohup` or systemd run must not use it, since being re-parented is normal there. The parent
 * compared with is the one at start-up, not at the call: a parent that died while the process was starting (before
 * the call) is noticed at the first check too.
 */
export function onParentExit(onGone: () => void, intervalMs = 500): () => void {
  const ppid = parentAtStart;
  const timer = setInterval(() => {
    if (process.ppid === ppid) return;
    clearInterval(timer);
    onGone();
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
