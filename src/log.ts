// The logger: one JSON object per line on stdout (journald-friendly). Owns redaction of secrets; never throws.

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const LEVEL_RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** Fields attached to one log line. Values are serialised with JSON.stringify. */
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Same as the level method, but at most once per `intervalMs` for `key`; suppressed lines are counted. */
  limited(level: LogLevel, key: string, intervalMs: number, msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

/** Removes credentials from a URL: userinfo and query values, and path segments that look like API keys. */
export function redactUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return '<invalid url>';
  }
  if (u.username !== '' || u.password !== '') {
    u.username = 'redacted';
    u.password = '';
  }
  for (const k of [...u.searchParams.keys()]) u.searchParams.set(k, 'redacted');
  // Long opaque path segments (Alchemy/Infura/QuickNode style keys) are secrets too.
  u.pathname = u.pathname
    .split('/')
    .map((seg) => (seg.length >= 16 && /^[A-Za-z0-9_-]+$/.test(seg) && /\d/.test(seg) ? 'redacted' : seg))
    .join('/');
  return u.toString();
}

export interface LoggerOptions {
  level: LogLevel;
  /** Where lines go; defaults to stdout. Tests pass an array sink. */
  write?: (line: string) => void;
  base?: LogFields;
  /** Takes each record instead of `write` (level, message, fields with the base merged in): a worker thread's
   * logger forwards records to the main thread's this way. */
  emit?: (level: LogLevel, msg: string, fields: LogFields) => void;
}

/** Creates a logger. */
export function createLogger(opts: LoggerOptions): Logger {
  const min = LEVEL_RANK[opts.level];
  const write = opts.write ?? ((line: string) => void process.stdout.write(line + '\n'));
  const limits = new Map<string, { last: number; suppressed: number }>();

  function emit(level: LogLevel, base: LogFields | undefined, msg: string, fields?: LogFields): void {
    if (LEVEL_RANK[level] < min) return;
    if (opts.emit !== undefined) return opts.emit(level, msg, { ...base, ...fields });
    const rec: LogFields = { time: new Date().toISOString(), level, msg, ...base, ...fields };
    let line: string;
    try {
      line = JSON.stringify(rec, (_k, v: unknown) => (typeof v === 'bigint' ? '0x' + v.toString(16) : v));
    } catch {
      line = JSON.stringify({ time: rec.time, level, msg, note: 'fields not serialisable' });
    }
    write(line);
  }

  function make(base: LogFields | undefined): Logger {
    return {
      debug: (m, f) => emit('debug', base, m, f),
      info: (m, f) => emit('info', base, m, f),
      warn: (m, f) => emit('warn', base, m, f),
      error: (m, f) => emit('error', base, m, f),
      limited(level, key, intervalMs, m, f) {
        const now = Date.now();
        const st = limits.get(key);
        if (st !== undefined && now - st.last < intervalMs) {
          st.suppressed++;
          return;
        }
        const suppressed = st?.suppressed ?? 0;
        limits.set(key, { last: now, suppressed: 0 });
        emit(level, base, m, suppressed > 0 ? { ...f, suppressed } : f);
      },
      child: (f) => make({ ...base, ...f }),
    };
  }
  return make(opts.base);
}

/** A logger that drops everything (tests and benchmarks). */
export const silentLogger: Logger = createLogger({ level: 'error', write: () => {} });
