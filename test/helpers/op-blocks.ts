// Where the real-block fixtures are: ../shared/conformance/op-blocks beside the clone (CI lays it there; a user's
// clone may not have it). They are read in place, never copied into the project; a test whose data is absent skips
// and says so.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root (this file is test/helpers/op-blocks.ts). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** ../shared/conformance/op-blocks beside the clone, or null when it is absent. */
export function opBlocksDir(): string | null {
  const dir = join(ROOT, '..', 'shared', 'conformance', 'op-blocks');
  return existsSync(join(dir, 'README.md')) ? dir : null;
}

/** Why a real-block test skips: the data is not beside this clone. */
export const OP_BLOCKS_ABSENT = 'skipped: ../shared/conformance/op-blocks is not beside this clone (real-block fixtures are read in place)';

/** One real-block fixture file, as `npm run witness-node -- <file>` takes it. */
export interface OpBlockFixture {
  /** e.g. "op-sepolia-block-26207960". */
  name: string;
  /** Absolute path of the file to load: the kona tar / tar.gz, or the Ecotone `.block.json`. */
  file: string;
  layout: 'kona-executor' | 'kona-ecotone';
}

/** Every fixture under op-blocks/, by name; empty when the directory is absent. */
export function opBlockFixtures(): OpBlockFixture[] {
  const dir = opBlocksDir();
  if (dir === null) return [];
  const out: OpBlockFixture[] = [];
  const kona = join(dir, 'kona-executor');
  if (existsSync(kona)) {
    for (const f of readdirSync(kona).sort()) {
      const m = /^(.+)\.tar(\.gz)?$/.exec(f);
      if (m !== null) out.push({ name: m[1]!, file: join(kona, f), layout: 'kona-executor' });
    }
  }
  const eco = join(dir, 'kona-ecotone');
  if (existsSync(eco)) {
    for (const f of readdirSync(eco).sort()) {
      const m = /^(.+)\.block\.json$/.exec(f);
      if (m !== null) out.push({ name: m[1]!, file: join(eco, f), layout: 'kona-ecotone' });
    }
  }
  return out;
}
