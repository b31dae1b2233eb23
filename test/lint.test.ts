// The lint config holds the one-way arrows of src/: a deliberately added back arrow (linted as if it were a file of
// that folder, with ESLint's Node API) is an error of no-restricted-imports; the allowed direction is not.
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

const root = fileURLToPath(new URL('..', import.meta.url));
// The repository's own config, running only the rule under test (its options as the config sets them per folder):
// the other rules' results were filtered out anyway, and running them over src/ was about a fifth of this file's CPU.
const eslint = new ESLint({ cwd: root, ruleFilter: ({ ruleId }) => ruleId === 'no-restricted-imports' });

/** The no-restricted-imports messages for `code` placed at `filePath` (relative to the repository). */
async function arrowErrors(filePath: string, code: string): Promise<string[]> {
  const [r] = await eslint.lintText(code + '\nexport {};\n', { filePath: root + filePath });
  return (r?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

t.test('back arrows are lint errors; forward arrows are not', async (t) => {
  // [file, import, forbidden]
  const cases: [string, string, boolean][] = [
    ['src/state/bad.ts', "import type { Flashblock } from '../ingest/frame.js';", true],
    ['src/state/bad.ts', "import { startDaemon } from '../daemon.js';", true],
    ['src/state/bad.ts', "import type { Metrics } from '../metrics/metrics.js';", true],
    ['src/chain/bad.ts', "import type { PendingView } from '../state/view.js';", true],
    ['src/chain/bad.ts', "import type { Logger } from '../log.js';", true],
    ['src/rpc/methods/bad.ts', "import { mountStream } from '../../stream/server.js';", true],
    ['src/rpc/bad.ts', "import { IngestPipeline } from '../ingest/pipeline.js';", true],
    ['src/stream/bad.ts', "import { Subscriptions } from '../rpc/subscriptions.js';", true],
    ['src/ingest/bad.ts', "import { mountRpc } from '../rpc/server.js';", true],
    ['src/rpc/methods/bad.ts', "import type { PendingState } from '../../state/pending.js';", true],
    ['src/stream/bad.ts', "import type { RawFrame } from '../state/block.js';", true],
    ['src/exec/bad.ts', "import type { PendingView } from '../state/view.js';", true],
    ['src/execution.ts', "import { Shapes } from './rpc/shapes/json.js';", true],
    ['src/metrics/bad.ts', "import type { PendingView } from '../state/view.js';", true],
    ['src/binaries.ts', "import './main.js';", true],
    ['src/state/bad.ts', "import type { Flashblock } from '../chain/flashblock.js';", false],
    ['src/rpc/bad.ts', "import type { PendingView } from '../state/view.js';", false],
    ['src/stream/bad.ts', "import type { StateEvents } from '../state/events.js';", false],
    ['src/ingest/bad.ts', "import { PendingState } from '../state/pending.js';", false],
    ['src/chain/bad.ts', "import { keccak256 } from './keccak.js';", false],
  ];
  for (const [file, code, forbidden] of cases) {
    const errors = await arrowErrors(file, code);
    if (forbidden) t.match(errors, [/imports point ingest → state → \{rpc, stream\}|bottom layer/], `${file}: ${code} is refused`);
    else t.same(errors, [], `${file}: ${code} is allowed`);
  }
});

t.test('the tree itself has no back arrow', async (t) => {
  const results = await eslint.lintFiles(['src/**/*.ts']);
  const arrows = results.flatMap((r) => r.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => `${r.filePath}:${m.line} ${m.message}`));
  t.same(arrows, []);
});
