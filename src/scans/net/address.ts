/**
 * Which addresses a scan may connect to. By default none of loopback, private, shared (CGNAT),
 * link-local (cloud metadata at 169.254.169.254 and fd00:ec2::254 among them), unique-local, multicast,
 * documentation, benchmarking or reserved ranges; IPv4-mapped and NAT64 IPv6 addresses are judged by the
 * IPv4 address they carry. OPTMARK_SCAN_ALLOW_NETWORKS (a CIDR list) admits chosen networks. The check
 * is made on the address actually connected (./fetcher.ts checks the socket, after DNS, on every
 * redirect; git is pinned to the checked address).
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { ScanError } from '../types.js';

const BLOCKED_V4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
];
const BLOCKED_V6 = ['::/128', '::1/128', '100::/64', '2001:db8::/32', 'fc00::/7', 'fe80::/10', 'fec0::/10', 'ff00::/8'];

const blocked = new BlockList();
for (const c of BLOCKED_V4) addCidr(blocked, c);
for (const c of BLOCKED_V6) addCidr(blocked, c);

function addCidr(list: BlockList, cidr: string): void {
  const [net, bits] = cidr.split('/');
  const family = isIP(net ?? '');
  const prefix = Number(bits);
  if (!family || !/^\d+$/.test(bits ?? '') || prefix > (family === 4 ? 32 : 128)) throw new Error(`not a CIDR network: ${JSON.stringify(cidr)}`);
  list.addSubnet(net!, prefix, family === 4 ? 'ipv4' : 'ipv6');
}

/** Parses a comma- or space-separated CIDR list (a bare address is one host); throws naming the bad entry. */
export function parseNetworks(raw: string): string[] {
  const list = raw.split(/[\s,]+/).filter(Boolean);
  const probe = new BlockList();
  return list.map((entry) => {
    const cidr = entry.includes('/') ? entry : `${entry}/${isIP(entry) === 6 ? 128 : 32}`;
    addCidr(probe, cidr);
    return cidr;
  });
}

/** The IPv4 address an IPv6 address carries (IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96), if any. */
function embeddedV4(ip: string): string | undefined {
  const m = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (m) return m[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(ip);
  if (!hex) return undefined;
  const hi = Number.parseInt(hex[1]!, 16);
  const lo = Number.parseInt(hex[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

export class AddressPolicy {
  readonly #allowed = new BlockList();

  /** `allow`: CIDR networks admitted although in a blocked range (OPTMARK_SCAN_ALLOW_NETWORKS). */
  constructor(allow: readonly string[] = []) {
    for (const c of allow) addCidr(this.#allowed, c);
  }

  /** Whether a connection to `ip` (a literal address) may be made. */
  allows(ip: string): boolean {
    const family = isIP(ip);
    if (!family) return false;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (this.#allowed.check(ip, type)) return true;
    const v4 = family === 6 ? embeddedV4(ip) : undefined;
    if (v4 !== undefined) return this.allows(v4);
    if (family === 6 && /^64:ff9b::/i.test(ip)) return false;
    return !blocked.check(ip, type);
  }

  /** Throws `target_not_allowed` unless `ip` may be connected to. */
  check(ip: string, host: string): void {
    if (!this.allows(ip))
      throw new ScanError('target_not_allowed', `${host} is at ${ip}, an address scans may not reach (OPTMARK_SCAN_ALLOW_NETWORKS admits networks)`);
  }

  /**
   * Resolves `host` and returns the first address, having checked every address it resolves to: a name
   * with any refused address is refused (a resolver that answers differently later is met by the socket
   * check).
   */
  async resolve(host: string): Promise<{ address: string; family: 4 | 6 }> {
    const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    const literal = isIP(bare);
    if (literal) {
      this.check(bare, host);
      return { address: bare, family: literal as 4 | 6 };
    }
    let all: { address: string; family: number }[];
    try {
      all = await lookup(bare, { all: true, verbatim: true });
    } catch (err) {
      throw new ScanError('fetch_failed', `${host} does not resolve: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (all.length === 0) throw new ScanError('fetch_failed', `${host} does not resolve`);
    for (const a of all) this.check(a.address, host);
    return { address: all[0]!.address, family: all[0]!.family as 4 | 6 };
  }
}
