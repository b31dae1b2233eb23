// Line-by-line questions for the operator CLI over any readable/writable pair (a terminal or pipes). Owns buffering
// of answers that arrive before they are asked for; must not print anything but the questions it is given.
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';

/** Standard streams of a CLI command; tests pass their own. */
export interface CliIo {
  stdin: Readable & { isTTY?: boolean };
  stdout: Writable;
  stderr: Writable;
}

/** Asks questions one line at a time. Answers piped in ahead of their question are kept in order. */
export class Prompter {
  private readonly rl: Interface;
  private readonly lines: string[] = [];
  private waiter: ((line: string | null) => void) | null = null;
  private ended = false;
  private readonly tty: boolean;

  constructor(private readonly io: CliIo) {
    this.tty = io.stdin.isTTY === true;
    this.rl = createInterface({ input: io.stdin, output: io.stdout, terminal: this.tty });
    this.rl.on('line', (line: string) => {
      if (this.waiter !== null) {
        const w = this.waiter;
        this.waiter = null;
        w(line);
      } else this.lines.push(line);
    });
    this.rl.on('close', () => {
      this.ended = true;
      if (this.waiter !== null) {
        const w = this.waiter;
        this.waiter = null;
        w(null);
      }
    });
  }

  /** Prints `question` and resolves with the next answer line (trimmed), or null when the input has ended. */
  async ask(question: string): Promise<string | null> {
    this.rl.setPrompt(question);
    this.rl.prompt();
    const line = this.lines.shift() ?? (this.ended ? null : await new Promise<string | null>((resolve) => (this.waiter = resolve)));
    // A pipe does not echo: end the question's line so the transcript stays readable (the answer is not shown,
    // it may carry a secret).
    if (!this.tty) this.io.stdout.write('\n');
    return line === null ? null : line.trim();
  }

  /** Stops reading the input. */
  close(): void {
    this.rl.close();
  }
}
