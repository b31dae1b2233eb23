// Test helper: in-memory standard streams for the CLI subcommands (src/cli), with `answers` as lines on stdin.
import { PassThrough } from 'node:stream';
import type { CliIo } from '../../src/cli/prompt.js';

/** Streams for runSetup/runVerify and what they wrote so far. */
export function captureIo(answers: string[] = []): { io: CliIo; out(): string; err(): string } {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  stdin.end(answers.map((a) => a + '\n').join(''));
  return { io: { stdin, stdout, stderr }, out: () => out, err: () => err };
}
