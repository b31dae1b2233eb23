// Client addresses for limits and quotas: address normalisation, trusted-proxy CIDRs (node:net BlockList) and the
// X-Forwarded-For rule (honoured only when the peer is a trusted proxy). Pure; knows nothing of sockets.
import { BlockList, isIP } from 'node:net';
import { StartupCode, StartupError } from '../errors.js';

const MAPPED_V4 = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;

/**
 * The canonical text of an address (the per-IP limit key), or null when `text` is not one: dotted IPv4, or the
 * compressed lower-case IPv6 form (RFC 5952, via WHATWG URL). Brackets and a zone are dropped; IPv4-mapped IPv6 is
 * folded to IPv4 (dual-stack listeners report IPv4 clients that way).
 */
export function normalizeIp(text: string): string | null {
  let s = text.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const kind = isIP(s);
  if (kind === 4) return s;
  if (kind !== 6) return null;
  const v6 = new URL(`http://[${s}]`).hostname.slice(1, -1);
  const m = MAPPED_V4.exec(v6);
  if (m === null) return v6;
  const hi = parseInt(m[1] as string, 16);
  const lo = parseInt(m[2] as string, 16);
  return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
}

/** A list of CIDR blocks (a bare address counts as /32 or /128), matched by node:net's BlockList. */
export class CidrList {
  private readonly list = new BlockList();
  readonly size: number;

  /** Throws StartupError E_CONFIG naming the bad entry. */
  constructor(cidrs: readonly string[]) {
    for (const c of cidrs) {
      const slash = c.indexOf('/');
      const addr = slash < 0 ? c : c.slice(0, slash);
      const family = isIP(addr);
      const prefixText = slash < 0 ? String(family === 4 ? 32 : 128) : c.slice(slash + 1);
      const prefix = Number(prefixText);
      if (family === 0 || !/^\d{1,3}$/.test(prefixText) || prefix > (family === 4 ? 32 : 128)) {
        throw new StartupError(StartupCode.CONFIG_INVALID, `--trusted-proxies: "${c}" is not an IPv4/IPv6 address or CIDR (e.g. 10.0.0.0/8, fd00::/8)`);
      }
      this.list.addSubnet(addr, prefix, family === 4 ? 'ipv4' : 'ipv6');
    }
    this.size = cidrs.length;
  }

  /** Whether the address `ip` (as `normalizeIp` returns it) lies inside any block. */
  contains(ip: string): boolean {
    return this.list.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
  }
}

/**
 * The client address for limits. The peer address is used unless it is a trusted proxy; then X-Forwarded-For is
 * read right to left, skipping trusted proxies, and the first untrusted (or, failing that, the leftmost) address wins.
 * Unparseable XFF entries stop the walk (the peer, or the last trusted hop, is used). Returns `normalizeIp` text.
 */
export function clientIp(peer: string, forwardedFor: string, trusted: CidrList): string {
  const peerIp = normalizeIp(peer);
  if (peerIp === null) return peer;
  if (trusted.size === 0 || forwardedFor === '' || !trusted.contains(peerIp)) return peerIp;
  let chosen = peerIp;
  const hops = forwardedFor.split(',');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeIp(hops[i] as string);
    if (hop === null) break;
    chosen = hop;
    if (!trusted.contains(hop)) break;
  }
  return chosen;
}

/**
 * Every X-Forwarded-For line of a request, joined in order with ", " (RFC 7230: repeated fields are one list). uWS's
 * getHeader returns only the first line, and a proxy that appends its own line after a client's forged one would
 * otherwise let the client choose the address its limits count.
 */
export function forwardedFor(req: { forEach(cb: (key: string, value: string) => void): void }): string {
  let out = '';
  req.forEach((k, v) => {
    if (k === 'x-forwarded-for') out = out === '' ? v : out + ', ' + v;
  });
  return out;
}

