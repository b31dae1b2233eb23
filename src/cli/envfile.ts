// The environment file systemd reads for flashblocksd (EnvironmentFile= in systemd/flashblocksd.service): formatting
// KEY=value lines and writing them with mode 0600, never replacing an existing file unless told to.
import { chmod, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** The file systemd/flashblocksd.service reads (`EnvironmentFile=-/etc/flashblocksd/flashblocksd.env`). */
export const DEFAULT_ENV_FILE = '/etc/flashblocksd/flashblocksd.env';

/** Why a write did not happen. */
export class EnvFileError extends Error {
  constructor(
    readonly reason: 'exists' | 'denied' | 'io',
    message: string,
  ) {
    super(message);
    this.name = 'EnvFileError';
  }
}

/**
 * Quotes a value for systemd's EnvironmentFile (and a POSIX shell): bare when it is made of safe characters,
 * else double-quoted with \ " $ ` escaped. Newlines cannot be represented and are refused.
 */
export function quoteEnvValue(value: string): string {
  if (/[\r\n\0]/.test(value)) throw new Error('a value cannot contain a line break');
  if (/^[A-Za-z0-9_.,:/@%+=-]*$/.test(value)) return value;
  return '"' + value.replace(/[\\"$`]/g, (c) => '\\' + c) + '"';
}

/** The file's text: a header comment, then one KEY=value line per entry, in the given order. */
export function formatEnvFile(entries: ReadonlyArray<readonly [string, string]>, header: readonly string[]): string {
  const lines = header.map((h) => ('# ' + h).trimEnd());
  lines.push('');
  for (const [k, v] of entries) lines.push(`${k}=${quoteEnvValue(v)}`);
  return lines.join('\n') + '\n';
}

/**
 * Writes `text` to `path` with mode 0600, creating the parent directory (0755) when missing. Without `force` an
 * existing file is never touched (exclusive create); with it the file is replaced atomically (write + rename).
 */
export async function writeEnvFile(path: string, text: string, force: boolean): Promise<void> {
  const fail = (e: unknown): never => {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw new EnvFileError('exists', `${path} already exists; not overwritten (re-run with --force to replace it)`);
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
      throw new EnvFileError('denied', `cannot write ${path}: permission denied (${code}); run as root (sudo), or choose another path with --env-path`);
    }
    throw new EnvFileError('io', `cannot write ${path}: ${(e as Error).message}`);
  };
  await mkdir(dirname(path), { recursive: true, mode: 0o755 }).catch(fail);
  if (!force) {
    await writeFile(path, text, { flag: 'wx', mode: 0o600 }).catch(fail);
    await chmod(path, 0o600).catch(fail);
    return;
  }
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    await writeFile(tmp, text, { flag: 'wx', mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    fail(e);
  }
}
