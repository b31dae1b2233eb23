// Client addresses for connection limits: IPv4/IPv6 parsing, CIDR matching, and the X-Forwarded-For rule (honoured
// only when the peer is a trusted proxy). Pure; knows nothing of sockets.
import { isIP } from 'node:net';
import { StartupCode, StartupError } from '../errors.js';

/** Address bytes: 4 for IPv4 (IPv4-mapped IPv6 is folded to IPv4), 16 for IPv6; null when not an address. */
export function parseIp(text: string): Uint8Array | null {
  let s = text.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const kind = isIP(s);
  if (kind === 4) return parseV4(s);
  if (kind !== 6) return null;
  const v6 = parseV6(s);
  if (v6 === null) return null;
  // ::ffff:a.b.c.d is the same client as a.b.c.d (dual-stack listeners report it that way).
  let mapped = v6[10] === 0xff && v6[11] === 0xff;
  for (let i = 0; i < 10 && mapped; i++) if (v6[i] !== 0) mapped = false;
  return mapped ? v6.slice(12) : v6;
}

function parseV4(s: string): Uint8Array {
  const out = new Uint8Array(4);
  const parts = s.split('.');
  for (let i = 0; i < 4; i++) out[i] = Number(parts[i]);
  return out;
}

function parseV6(s: string): Uint8Array | null {
  const out = new Uint8Array(16);
  let tail = s;
  let v4: Uint8Array | null = null;
  const lastColon = s.lastIndexOf(':');
  if (s.indexOf('.', lastColon) >= 0) {
    v4 = parseV4(s.slice(lastColon + 1));
    tail = s.slice(0, lastColon + 1) + '0:0';
  }
  const halves = tail.split('::');
  const head = halves[0] === '' ? [] : halves[0]!.split(':');
  const rest = halves.length > 1 ? (halves[1] === '' ? [] : halves[1]!.split(':')) : [];
  const groups = halves.length > 1 ? [...head, ...new Array<string>(8 - head.length - rest.length).fill('0'), ...rest] : head;
  if (groups.length !== 8) return null;
  for (let i = 0; i < 8; i++) {
    const g = parseInt(groups[i]!, 16);
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  }
  if (v4 !== null) out.set(v4, 12);
  return out;
}

/** Canonical text of an address (the per-IP limit key): dotted IPv4, or 8 lower-case hex groups for IPv6. */
export function ipKey(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join('.');
  const g: string[] = [];
  for (let i = 0; i < 16; i += 2) g.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return g.join(':');
}

interface Cidr {
  bytes: Uint8Array;
  prefix: number;
}

/** A list of CIDR blocks (a bare address counts as /32 or /128). */
export class CidrList {
  private readonly blocks: Cidr[] = [];

  /** Throws StartupError E_CONFIG naming the bad entry. */
  constructor(cidrs: readonly string[]) {
    for (const c of cidrs) {
      const slash = c.indexOf('/');
      const bytes = parseIp(slash < 0 ? c : c.slice(0, slash));
      const max = bytes === null ? 0 : bytes.length * 8;
      // An IPv4-mapped IPv6 block (::ffff:10.0.0.0/104) folds to IPv4 with the prefix shifted by 96.
      const mappedShift = bytes !== null && bytes.length === 4 && c.includes(':') ? 96 : 0;
      const prefix = slash < 0 ? max : Number(c.slice(slash + 1)) - mappedShift;
      if (bytes === null || !Number.isInteger(prefix) || prefix < 0 || prefix > max || (slash >= 0 && !/^\d+$/.test(c.slice(slash + 1)))) {
        throw new StartupError(StartupCode.CONFIG_INVALID, `--trusted-proxies: "${c}" is not an IPv4/IPv6 address or CIDR (e.g. 10.0.0.0/8, fd00::/8)`);
      }
      this.blocks.push({ bytes, prefix });
    }
  }

  get size(): number {
    return this.blocks.length;
  }

  /** Whether `ip` (bytes from parseIp) lies inside any block. */
  contains(ip: Uint8Array): boolean {
    for (const b of this.blocks) if (b.bytes.length === ip.length && inBlock(ip, b)) return true;
    return false;
  }
}

function inBlock(ip: Uint8Array, b: Cidr): boolean {
  const full = b.prefix >> 3;
  for (let i = 0; i < full; i++) if (ip[i] !== b.bytes[i]) return false;
  const bits = b.prefix & 7;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return ((ip[full]! ^ b.bytes[full]!) & mask) === 0;
}

/**
 * The client address for limits. The peer address is used unless it is a trusted proxy; then X-Forwarded-For is
 * read right to left, skipping trusted proxies, and the first untrusted (or, failing that, the leftmost) address wins.
 * Unparseable XFF entries stop the walk (the peer, or the last trusted hop, is used). Returns the ipKey text.
 */
export function clientIp(peer: string, forwardedFor: string, trusted: CidrList): string {
  const peerBytes = parseIp(peer);
  if (peerBytes === null) return peer;
  if (trusted.size === 0 || forwardedFor === '' || !trusted.contains(peerBytes)) return ipKey(peerBytes);
  let chosen = peerBytes;
  const hops = forwardedFor.split(',');
  for (let i = hops.length - 1; i >= 0; i--) {
    const b = parseIp(hops[i]!);
    if (b === null) break;
    chosen = b;
    if (!trusted.contains(b)) break;
  }
  return ipKey(chosen);
}
