// A held block's pending balances (new_account_balances are cumulative within a block: an address keeps the value its
// newest flashblock reported), indexed without an entry object per address: a KeyTable of references to
// (flashblock, entry) pairs in the bodies, whose text holds the addresses. Access-list balances (X Layer) are read
// from the block's account post-values. Mutated by PendingBlock only.
import type { FlashblockBody } from '../chain/flashblock.js';
import type { AccountPost } from '../chain/access-list.js';
import { addressKey } from '../chain/keys.js';
import { KeyTable } from '../chain/key-table.js';

const ADDRESS_CHARS = 42;

/** See the file comment. */
export class BalanceIndex {
  private readonly table: KeyTable;
  /** Per reference: the flashblock and entry of the newest report. */
  private flashblock: Int32Array;
  private entry: Int32Array;
  private refs = 0;
  /** Addresses whose newest balance came from an access list, and the flashblock that carried it (rare: X Layer). */
  private fromAccessList: Map<string, number> | null = null;

  constructor(expected: number) {
    this.table = new KeyTable(expected);
    this.flashblock = new Int32Array(Math.max(16, expected));
    this.entry = new Int32Array(this.flashblock.length);
  }

  /** Records the balances of flashblock `f` (whose body is `bodies[f]`), after those of every earlier one. */
  addFlashblock(f: number, bodies: readonly FlashblockBody[]): void {
    const body = bodies[f]!;
    const t = this.table;
    for (let e = 0; e < body.balanceCount; e++) {
      t.seek(body.balanceKey(e));
      let found = false;
      for (let r = t.next(); r >= 0; r = t.next()) {
        if (!body.balanceAddressSame(e, bodies[this.flashblock[r]!]!, this.entry[r]!)) continue;
        this.flashblock[r] = f;
        this.entry[r] = e;
        found = true;
        break;
      }
      if (found) continue;
      if (this.refs === this.flashblock.length) this.grow();
      this.flashblock[this.refs] = f;
      this.entry[this.refs] = e;
      t.add(body.balanceKey(e), this.refs++);
    }
  }

  /** Records that flashblock `f`'s access list set `address`'s balance (applied after its balances). */
  addAccessList(f: number, address: string): void {
    (this.fromAccessList ??= new Map()).set(address, f);
  }

  /** The newest balance of `address` in this block, or undefined when no flashblock reported it. */
  lookup(address: string, bodies: readonly FlashblockBody[], accountPost: ReadonlyMap<string, AccountPost>): bigint | undefined {
    let f = -1;
    let e = -1;
    if (address.length === ADDRESS_CHARS) {
      const t = this.table;
      t.seek(addressKey(address));
      for (let r = t.next(); r >= 0; r = t.next()) {
        const b = bodies[this.flashblock[r]!]!;
        if (!b.balanceAddressIs(this.entry[r]!, address)) continue;
        f = this.flashblock[r]!;
        e = this.entry[r]!;
        break;
      }
    }
    const al = this.fromAccessList?.get(address);
    if (al !== undefined && al >= f) return accountPost.get(address)?.balance;
    return f < 0 ? undefined : bodies[f]!.balance(e);
  }

  private grow(): void {
    const f = new Int32Array(2 * this.flashblock.length);
    const e = new Int32Array(f.length);
    f.set(this.flashblock);
    e.set(this.entry);
    this.flashblock = f;
    this.entry = e;
  }
}
