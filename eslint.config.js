// Lint configuration: typescript-eslint recommended rules over src, test, bench and scripts, plus the one-way arrows
// of src/ (ingest → state → {rpc, stream}, chain at the bottom, config/errors/log/metrics/node as leaves, nothing
// importing main.ts or daemon.ts). A new back arrow fails `npm run lint` (test/lint.test.ts shows it).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** An import pattern matching the folder `dir` of src/ (or src/<dir>.ts) reached by any relative path. */
const into = (dir) => `(^|/)${dir}(/|\\.js$)`;

/** `files` may not import any of `dirs`: one config object per folder (a later object would replace, not add). */
function arrows(files, dirs, why) {
  return {
    files,
    rules: {
      'no-restricted-imports': ['error', { patterns: dirs.map((d) => ({ regex: into(d), message: `${why} (imports point ingest → state → {rpc, stream}; chain at the bottom)` })) }],
    },
  };
}

const TOP = ['main', 'daemon'];
/** The writer side of state/: readers (rpc, stream) see state only through state/view.ts and state/events.ts. */
const STATE_WRITERS = ['state/pending', 'state/block', 'state/senders', 'state/recover-worker'];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tap/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['src/chain/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: '^\\.\\./', message: 'chain/ is the bottom layer (pure codecs): it imports only chain/ and packages' }] }] },
  },
  arrows(['src/state/**/*.ts'], ['ingest', 'rpc', 'stream', 'cli', 'node', 'metrics', ...TOP], 'state/ knows nothing of ingest, sockets, the node or metrics'),
  arrows(['src/ingest/**/*.ts'], ['rpc', 'stream', 'cli', ...TOP], 'ingest/ writes state; it never imports its readers'),
  arrows(['src/rpc/**/*.ts'], ['ingest', 'stream', 'cli', ...STATE_WRITERS, ...TOP], 'rpc/ reads the state view (state/view.ts); it never imports ingest, stream or the state writers'),
  arrows(['src/stream/**/*.ts'], ['ingest', 'rpc', 'cli', 'node', ...STATE_WRITERS, ...TOP], 'stream/ is only the raw rebroadcast; it never imports ingest, rpc or the state writers'),
  arrows(['src/exec/**/*.ts'], ['ingest', 'state', 'rpc', 'stream', 'cli', 'metrics', 'execution', ...TOP], 'exec/ is the engine behind one interface; it knows nothing of pending state, RPC or metrics (it reaches the node through node/\'s client)'),
  arrows(['src/execution.ts'], ['ingest', 'rpc', 'stream', 'cli', ...STATE_WRITERS, ...TOP], 'the execution feed reads the state view and drives the engine; it never imports ingest, rpc or stream'),
  arrows(['src/limits/**/*.ts'], ['chain', 'ingest', 'state', 'rpc', 'stream', 'cli', 'node', 'exec', 'execution', ...TOP], 'limits/ decides connection limits and rate quotas (local or in Redis); it knows nothing of sockets, state or RPC'),
  arrows(['src/metrics/**/*.ts', 'src/config.ts', 'src/errors.ts', 'src/log.ts'], ['chain', 'ingest', 'state', 'rpc', 'stream', 'cli', 'node', ...TOP], 'config, errors, log and metrics are leaves'),
  arrows(['src/node/**/*.ts'], ['chain', 'ingest', 'state', 'rpc', 'stream', 'cli', 'exec', 'execution', ...TOP], 'node/ is a leaf client'),
  arrows(['src/cli/**/*.ts'], ['ingest', 'state', 'rpc', 'stream', ...TOP], 'cli/ talks to endpoints, never to the daemon inside'),
  arrows(['src/binaries.ts', 'src/child.ts'], TOP, 'nothing imports main.ts or daemon.ts'),
  arrows(['src/daemon.ts'], ['main', 'cli'], 'nothing imports main.ts'),
);
