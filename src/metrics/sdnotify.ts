// systemd notifications (READY, STOPPING, WATCHDOG) sent through the systemd-notify binary when NOTIFY_SOCKET is set.
// Never throws and never blocks start-up: a failed notification is logged and reported as `false`.
//
// Why a child process: sd_notify is one datagram on an AF_UNIX SOCK_DGRAM socket, which Node cannot open without a
// native addon. `systemd-notify` sends it for us; because the sender is then our child, the unit needs
// NotifyAccess=all, and systemd-notify (v246+) waits on a BARRIER so systemd can still map the short-lived sender to
// our cgroup. `--pid=<our pid>` adds MAINPID so systemd tracks this process, not the helper.
// Alternatives: Type=exec (no helper, but "started" the moment the binary is exec'd, before the ports are bound, so
// dependants and `systemctl start` return too early); a native sd-notify addon (one more binary to build and ship).

import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { tiedCommand } from '../child.js';
import type { Logger } from '../log.js';

const NOTIFY_TIMEOUT_MS = 5_000;

function notify(log: Logger, what: string, args: string[]): Promise<boolean> {
  if (!process.env.NOTIFY_SOCKET) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    try {
      // Tied like every child (src/child.ts): a helper stuck on the socket dies with us, not 5 s later.
      const cmd = tiedCommand('systemd-notify', args);
      execFile(cmd.file, cmd.args, { timeout: NOTIFY_TIMEOUT_MS }, (err, _stdout, stderr) => {
        if (err === null) {
          log.debug('systemd notified', { what });
          resolve(true);
          return;
        }
        const code = (err as NodeJS.ErrnoException).code;
        // setpriv reports a missing program with exit status 127 (as a shell does).
        const missing = code === 'ENOENT' || (cmd.tied && (code as unknown) === 127);
        const hint = missing ? 'systemd-notify is not installed' : String(stderr).trim() || err.message;
        log.warn(`systemd ${what} notification failed; check NotifyAccess=all in the unit`, { err: hint });
        resolve(false);
      });
    } catch (err) {
      log.warn(`systemd ${what} notification failed`, { err: err instanceof Error ? err.message : String(err) });
      resolve(false);
    }
  });
}

/**
 * Tells systemd the daemon is ready (call once every listener is bound and the first upstream connect was tried).
 * Resolves true when the notification was delivered, false when not under systemd or it failed.
 */
export function notifyReady(log: Logger, status?: string): Promise<boolean> {
  const args = ['--ready', `--pid=${process.pid}`];
  if (status !== undefined) args.push(`--status=${status}`);
  return notify(log, 'ready', args);
}

/** Tells systemd the daemon is shutting down (call first thing on SIGTERM). */
export function notifyStopping(log: Logger): Promise<boolean> {
  return notify(log, 'stopping', ['STOPPING=1']);
}

/** Pets systemd's watchdog (WatchdogSec=); only meaningful when watchdogIntervalMs() is not null. */
export function notifyWatchdog(log: Logger): Promise<boolean> {
  return notify(log, 'watchdog', ['WATCHDOG=1']);
}

/**
 * How often to pet the watchdog: half of WATCHDOG_USEC when systemd enabled the watchdog for this process,
 * else null.
 */
export function watchdogIntervalMs(env: NodeJS.ProcessEnv = process.env): number | null {
  if (!env.NOTIFY_SOCKET) return null;
  const usec = Number(env.WATCHDOG_USEC);
  if (!Number.isFinite(usec) || usec <= 0) return null;
  if (env.WATCHDOG_PID !== undefined && Number(env.WATCHDOG_PID) !== process.pid) return null;
  return Math.max(1, Math.floor(usec / 2000));
}

/** Options of startWatchdog. */
export interface WatchdogOptions {
  /** The environment systemd gave us (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** A pet is skipped when the event loop was blocked this long since the previous one; default one interval. */
  maxLoopDelayMs?: number;
}

/**
 * Pets systemd's watchdog every watchdogIntervalMs() from the event loop, so a stuck loop stops the pets, and skips
 * a pet when the loop was blocked for a whole interval (half of WatchdogSec=) since the last one: a daemon that
 * stalls that long is treated as wedged and systemd restarts it. Upstream or node trouble does not stop the pets
 * (/readyz reports it; a restart cannot fix a silent upstream and would drop every subscriber). Returns a function
 * that stops it; does nothing when the watchdog is off.
 */
export function startWatchdog(log: Logger, opts: WatchdogOptions = {}): () => void {
  const ms = watchdogIntervalMs(opts.env ?? process.env);
  if (ms === null) return () => {};
  const maxDelayMs = opts.maxLoopDelayMs ?? ms;
  // Our own ticker measures stalls: the longest gap between two ticks since the last pet. (perf_hooks'
  // monitorEventLoopDelay loses the stalled sample when reset() runs before its timer in the same timers phase.)
  // A twentieth of the interval (20–500 ms) measures the limit to 5 % without waking the loop 50 times a second.
  const TICK_MS = Math.min(500, Math.max(20, Math.floor(ms / 20)));
  let lastTick = performance.now();
  let maxGap = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    if (now - lastTick > maxGap) maxGap = now - lastTick;
    lastTick = now;
  }, TICK_MS);
  ticker.unref();
  let sending = false;
  const pet = (): void => {
    // A stall still in progress when the pet fires shows as the gap since the ticker's last run.
    const now = performance.now();
    const blockedMs = Math.max(maxGap, now - lastTick) - TICK_MS;
    maxGap = 0;
    lastTick = now;
    if (blockedMs >= maxDelayMs) {
      log.warn(`event loop was blocked for ${Math.round(blockedMs)} ms (limit ${maxDelayMs} ms): watchdog not petted; systemd restarts the daemon if it stays stuck`);
      return;
    }
    // A systemd-notify still running (it times out after 5 s): no second child on top of it.
    if (sending) return;
    sending = true;
    void notifyWatchdog(log).finally(() => (sending = false));
  };
  log.info(`systemd watchdog on: petting every ${ms} ms`);
  pet();
  const timer = setInterval(pet, ms);
  timer.unref();
  return () => {
    clearInterval(timer);
    clearInterval(ticker);
  };
}
