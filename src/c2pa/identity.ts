/**
 * The identity protect signs C2PA update manifests with (OPTMARK_C2PA=update): a private key and its
 * certificate chain, end entity first.
 *
 * - Configured: OPTMARK_C2PA_CERT_FILE (PEM chain) and OPTMARK_C2PA_KEY_FILE (PEM PKCS#8 private key,
 *   ECDSA P-256/384/521 or Ed25519), both or neither.
 * - Otherwise the server's own, in the data directory: c2pa/identity.pem (0600: the end entity's key,
 *   its certificate and the CA certificate), created once, at first start, from a fresh private CA whose
 *   key is used for that one issuance and then dropped; c2pa/ca.pem is the CA certificate alone, for
 *   whoever wants to add it to a reader's trust anchors (docs/c2pa.md).
 *
 * The reference reader (c2pa-rs) accepts such a chain (and also a self-signed end-entity certificate)
 * as valid and reports `signingCredential.untrusted`: its issuer is on no trust list it knows.
 */
import { createPrivateKey, type KeyObject, randomBytes, X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { CodedError } from '../errors.js';
import { loadOrCreateKeyFile, PUBLIC_FILE_MODE, readKeyFile, writeKeyFile } from '../secrets/files.js';
import { algOfKey, type CoseIdentity } from './cose.js';
import { certificatePem, generateEcKeys, issueCertificate, privateKeyPem } from './x509.js';

export const C2PA_DIR = 'c2pa';
export const IDENTITY_FILE = 'identity.pem';
export const CA_FILE = 'ca.pem';
/** A PEM key or chain file larger than this is refused unread. */
export const MAX_IDENTITY_FILE_BYTES = 64 * 1024;
/** Validity of the generated certificates. */
export const CA_VALIDITY_YEARS = 20;
export const SIGNER_VALIDITY_YEARS = 10;

export type C2paIdentityErrorCode = 'c2pa_identity_missing' | 'c2pa_identity_invalid';
export class C2paIdentityError extends CodedError<C2paIdentityErrorCode> {}

export interface IdentityLocation {
  dataDir: string;
  certFile?: string | undefined;
  keyFile?: string | undefined;
}

export interface SignerIdentity extends CoseIdentity {
  /** Subject of the end-entity certificate, as the docs and the warning name it. */
  subject: string;
  /** True when it is the server's own (generated) identity. */
  generated: boolean;
}

async function readSmall(path: string, what: string): Promise<string | undefined> {
  const tooLarge = (size: number) => new C2paIdentityError('c2pa_identity_invalid', `${what} ${path} is ${size} bytes, too large for a PEM file`);
  return (await readKeyFile(path, MAX_IDENTITY_FILE_BYTES, tooLarge))?.toString('latin1');
}

const PEM_BLOCK = /-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----/g;

/** The key and the chain found in PEM text (one file or two), checked against each other. */
export function parseIdentity(keyPem: string, chainPem: string, source: string, generated: boolean): SignerIdentity {
  const keyBlock = [...keyPem.matchAll(PEM_BLOCK)].find((m) => m[1] === 'PRIVATE KEY' || m[1] === 'EC PRIVATE KEY');
  if (!keyBlock) throw new C2paIdentityError('c2pa_identity_invalid', `${source}: no unencrypted PEM private key`);
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: keyBlock[0], format: 'pem' });
  } catch {
    // The crypto error is about the secret bytes: not passed on.
    throw new C2paIdentityError('c2pa_identity_invalid', `${source}: the private key does not parse`);
  }
  const alg = algOfKey(privateKey);
  if (!alg) {
    throw new C2paIdentityError(
      'c2pa_identity_invalid',
      `${source}: a ${privateKey.asymmetricKeyType ?? 'unknown'} key; C2PA signing here needs ECDSA (P-256, P-384, P-521) or Ed25519`,
    );
  }
  const certs = [...chainPem.matchAll(PEM_BLOCK)].filter((m) => m[1] === 'CERTIFICATE').map((m) => m[0]);
  if (certs.length === 0) throw new C2paIdentityError('c2pa_identity_invalid', `${source}: no PEM certificate`);
  let parsed: X509Certificate[];
  try {
    parsed = certs.map((c) => new X509Certificate(c));
  } catch {
    throw new C2paIdentityError('c2pa_identity_invalid', `${source}: a certificate does not parse`);
  }
  const leaf = parsed[0]!;
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new C2paIdentityError('c2pa_identity_invalid', `${source}: the first certificate is not the private key's (the chain must start with the signer)`);
  }
  if (leaf.ca) throw new C2paIdentityError('c2pa_identity_invalid', `${source}: the signing certificate is a CA certificate; C2PA needs an end-entity one`);
  return { alg, privateKey, chain: parsed.map((c) => new Uint8Array(c.raw)), subject: leaf.subject.replace(/\n/g, ', '), generated };
}

/** A fresh private CA and an end-entity certificate it issues, as the PEM text of identity.pem and ca.pem. */
export async function generateIdentity(now = new Date()): Promise<{ identity: string; ca: string }> {
  const years = (n: number): Date => new Date(Date.UTC(now.getUTCFullYear() + n, now.getUTCMonth(), now.getUTCDate()));
  const notBefore = new Date(now.getTime() - 3600_000); // an hour of slack for clocks behind ours
  const tag = randomBytes(4).toString('hex');
  const caName = { organization: 'optmark', commonName: `optmark private C2PA CA ${tag}` };
  const signerName = { organization: 'optmark', commonName: `optmark C2PA signer ${tag}` };
  const [ca, signer] = await Promise.all([generateEcKeys(), generateEcKeys()]);
  const issued = { issuer: caName, issuerKey: ca.privateKey, issuerPublicKey: ca.publicKey, notBefore };
  const caCert = await issueCertificate({ ...issued, subject: caName, subjectKey: ca.publicKey, ca: true, notAfter: years(CA_VALIDITY_YEARS) });
  const signerCert = await issueCertificate({
    ...issued,
    subject: signerName,
    subjectKey: signer.publicKey,
    ca: false,
    notAfter: years(SIGNER_VALIDITY_YEARS),
  });
  // The CA's private key is dropped here: it issued its one certificate.
  return { identity: privateKeyPem(signer.privateKey) + certificatePem(signerCert) + certificatePem(caCert), ca: certificatePem(caCert) };
}

/**
 * The signing identity: the configured files, else the data directory's, created there when missing
 * (never replaced; when two processes race, the first one's wins).
 */
export async function loadC2paIdentity(loc: IdentityLocation): Promise<SignerIdentity> {
  if ((loc.certFile === undefined) !== (loc.keyFile === undefined)) {
    throw new C2paIdentityError('c2pa_identity_invalid', 'OPTMARK_C2PA_CERT_FILE and OPTMARK_C2PA_KEY_FILE go together: set both or neither');
  }
  if (loc.certFile !== undefined && loc.keyFile !== undefined) {
    const chain = await readSmall(loc.certFile, 'OPTMARK_C2PA_CERT_FILE');
    if (chain === undefined) throw new C2paIdentityError('c2pa_identity_missing', `OPTMARK_C2PA_CERT_FILE ${loc.certFile} does not exist`);
    const key = await readSmall(loc.keyFile, 'OPTMARK_C2PA_KEY_FILE');
    if (key === undefined) throw new C2paIdentityError('c2pa_identity_missing', `OPTMARK_C2PA_KEY_FILE ${loc.keyFile} does not exist`);
    return parseIdentity(key, chain, `OPTMARK_C2PA_KEY_FILE/OPTMARK_C2PA_CERT_FILE`, false);
  }
  const dir = join(loc.dataDir, C2PA_DIR);
  const file = join(dir, IDENTITY_FILE);
  let created = false;
  const identity = await loadOrCreateKeyFile(file, {
    max: MAX_IDENTITY_FILE_BYTES,
    tooLarge: (size) => new C2paIdentityError('c2pa_identity_invalid', `the C2PA identity ${file} is ${size} bytes, too large for a PEM file`),
    parse: (bytes) => {
      const pem = bytes.toString('latin1');
      return parseIdentity(pem, pem, file, true);
    },
    make: async () => {
      const fresh = (await generateIdentity()).identity;
      created = true;
      return { value: parseIdentity(fresh, fresh, file, true), bytes: fresh };
    },
  });
  // The CA certificate alone (public), for trust lists: the one of the identity that won.
  if (created) await writeKeyFile(join(dir, CA_FILE), certificatePem(identity.chain[identity.chain.length - 1]!), { how: 'replace', mode: PUBLIC_FILE_MODE });
  return identity;
}
