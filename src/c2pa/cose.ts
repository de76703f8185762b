/**
 * The C2PA claim signature: a COSE_Sign1 (RFC 9052) with a detached payload. The wasm builder
 * (@contentauth/c2pa-wasm) cannot sign itself here: its JS SignerDefinition has no certificate chain, so
 * it hands the claim bytes to our callback and takes the whole COSE structure back ("direct COSE
 * handling"). Written by hand, because no maintained package does this job: the structure must carry
 * the chain in the protected header (x5chain, label 33) and be padded (unprotected `pad`, as c2pa-rs pads
 * its own) to exactly the size the builder reserved, so the manifest store keeps the length it was hashed
 * with. The COSE packages on npm (cose-js, cose-kit) do not pad a structure to a given size, so their
 * output would still be decoded and re-encoded here; a general CBOR encoder would replace only the 20
 * lines of `cbor` below, for a new dependency. The signature itself is node:crypto's.
 */
import { type KeyObject, sign } from 'node:crypto';

type Cbor = number | string | Uint8Array | Cbor[] | Map<number | string, Cbor> | null | { tag: number; value: Cbor };

function head(major: number, n: number): Buffer {
  const m = major << 5;
  if (n < 24) return Buffer.from([m | n]);
  if (n < 0x100) return Buffer.from([m | 24, n]);
  if (n < 0x10000) return Buffer.from([m | 25, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = m | 26;
  b.writeUInt32BE(n, 1);
  return b;
}

/** Deterministic CBOR of the few types COSE needs here (integers within ±2^32, maps in the given order). */
export function cbor(v: Cbor): Buffer {
  if (v === null) return Buffer.from([0xf6]);
  if (typeof v === 'number') return v >= 0 ? head(0, v) : head(1, -1 - v);
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    return Buffer.concat([head(3, s.length), s]);
  }
  if (v instanceof Uint8Array) return Buffer.concat([head(2, v.length), v]);
  if (Array.isArray(v)) return Buffer.concat([head(4, v.length), ...v.map(cbor)]);
  if (v instanceof Map) return Buffer.concat([head(5, v.size), ...[...v].flatMap(([k, x]) => [cbor(k), cbor(x)])]);
  return Buffer.concat([head(6, v.tag), cbor(v.value)]);
}

/** COSE algorithm identifiers and the names c2pa-rs's SigningAlg parses. */
export type CoseAlg = 'es256' | 'es384' | 'es512' | 'ed25519';
const COSE_ALG: Record<CoseAlg, number> = { es256: -7, es384: -35, es512: -36, ed25519: -8 };
const HASH: Record<CoseAlg, string | null> = { es256: 'sha256', es384: 'sha384', es512: 'sha512', ed25519: null };

/** The signing algorithm of a private key: ECDSA on P-256/384/521 or Ed25519; undefined for others. */
export function algOfKey(key: KeyObject): CoseAlg | undefined {
  if (key.asymmetricKeyType === 'ed25519') return 'ed25519';
  if (key.asymmetricKeyType !== 'ec') return undefined;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  return curve === 'prime256v1' ? 'es256' : curve === 'secp384r1' ? 'es384' : curve === 'secp521r1' ? 'es512' : undefined;
}

export interface CoseIdentity {
  alg: CoseAlg;
  privateKey: KeyObject;
  /** DER certificates, end entity first. */
  chain: Uint8Array[];
}

/** Room the builder reserves for the signature: the chain, a signature, and COSE framing. */
export function reserveSizeFor(identity: CoseIdentity): number {
  return identity.chain.reduce((n, c) => n + c.length, 0) + 1024 + 256;
}

/**
 * COSE_Sign1_Tagged over `payload` (detached), exactly `size` bytes long. Throws when the structure
 * does not fit in `size`.
 */
export function coseSign1(identity: CoseIdentity, payload: Uint8Array, size: number): Buffer {
  const x5chain: Cbor = identity.chain.length === 1 ? identity.chain[0]! : identity.chain;
  const prot = cbor(
    new Map<number, Cbor>([
      [1, COSE_ALG[identity.alg]],
      [33, x5chain],
    ]),
  );
  const toBeSigned = cbor(['Signature1', prot, new Uint8Array(0), payload]);
  const signature = sign(
    HASH[identity.alg],
    toBeSigned,
    identity.alg === 'ed25519' ? identity.privateKey : { key: identity.privateKey, dsaEncoding: 'ieee-p1363' },
  );
  const build = (pad: number): Buffer => cbor({ tag: 18, value: [prot, new Map<string, Cbor>([['pad', new Uint8Array(pad)]]), null, signature] });
  // The pad's length field grows at 24, 256 and 65536 bytes: try the guess and its neighbours.
  const bare = build(0).length;
  for (const guess of [size - bare, size - bare - 1, size - bare - 2, size - bare - 4]) {
    if (guess < 0) continue;
    const out = build(guess);
    if (out.length === size) return out;
  }
  throw new Error(`the COSE signature (${bare} bytes unpadded) does not fit the ${size} bytes reserved for it`);
}
