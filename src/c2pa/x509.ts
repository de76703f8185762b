/**
 * Issues the server's own C2PA signing identity: a private CA certificate and an end-entity
 * certificate it signs, both meeting the C2PA certificate profile as c2pa-rs checks it (X.509 v3,
 * ECDSA P-256 with SHA-256 or Ed25519; the CA with basicConstraints cA and keyCertSign/cRLSign; the
 * end entity not a CA, keyUsage digitalSignature only, extKeyUsage emailProtection and
 * documentSigning, never anyExtendedKeyUsage; both with subject and authority key identifiers).
 */
import { createHash, type KeyObject, randomBytes, sign } from 'node:crypto';
import { bits, bool, explicit, implicit, octets, oid, seq, set, small, time, uint, utf8 } from './der.js';

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  ecdsaSha256: '1.2.840.10045.4.3.2',
  ed25519: '1.3.101.112',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectKeyId: '2.5.29.14',
  authorityKeyId: '2.5.29.35',
  emailProtection: '1.3.6.1.5.5.7.3.4',
  documentSigning: '1.3.6.1.5.5.7.3.36',
};

export interface IssuedName {
  commonName: string;
  organization: string;
}

function name(n: IssuedName): Buffer {
  return seq(set(seq(oid(OID.organization), utf8(n.organization))), set(seq(oid(OID.commonName), utf8(n.commonName))));
}

function extension(id: string, critical: boolean, value: Uint8Array): Buffer {
  return critical ? seq(oid(id), bool(true), octets(value)) : seq(oid(id), octets(value));
}

/** The key identifier of a public key: SHA-1 of its DER SubjectPublicKeyInfo (RFC 5280 4.2.1.2 allows any such method). */
export function keyId(publicKey: KeyObject): Buffer {
  return createHash('sha1')
    .update(publicKey.export({ type: 'spki', format: 'der' }))
    .digest();
}

function algorithmOf(key: KeyObject): { id: Buffer; hash: string | null } {
  if (key.asymmetricKeyType === 'ed25519') return { id: seq(oid(OID.ed25519)), hash: null };
  if (key.asymmetricKeyType === 'ec') return { id: seq(oid(OID.ecdsaSha256)), hash: 'sha256' };
  throw new Error(`cannot issue certificates with a ${key.asymmetricKeyType} key`);
}

export interface CertificateRequest {
  subject: IssuedName;
  subjectKey: KeyObject;
  issuer: IssuedName;
  /** The issuer's private key (the subject's own for a self-signed CA). */
  issuerKey: KeyObject;
  issuerPublicKey: KeyObject;
  ca: boolean;
  notBefore: Date;
  notAfter: Date;
}

/** A DER X.509 v3 certificate. */
export function issueCertificate(r: CertificateRequest): Buffer {
  const alg = algorithmOf(r.issuerKey);
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  serial[0]! |= 0x01; // positive, 16 bytes, never zero
  const extensions = [
    extension(OID.basicConstraints, true, r.ca ? seq(bool(true), small(0)) : seq()),
    // keyCertSign + cRLSign for the CA (bits 5, 6); digitalSignature (bit 0) for the end entity.
    extension(OID.keyUsage, true, r.ca ? bits(Buffer.from([0x06]), 1) : bits(Buffer.from([0x80]), 7)),
    ...(r.ca ? [] : [extension(OID.extKeyUsage, false, seq(oid(OID.emailProtection), oid(OID.documentSigning)))]),
    extension(OID.subjectKeyId, false, octets(keyId(r.subjectKey))),
    extension(OID.authorityKeyId, false, seq(implicit(0, keyId(r.issuerPublicKey)))),
  ];
  const tbs = seq(
    explicit(0, small(2)),
    uint(serial),
    alg.id,
    name(r.issuer),
    seq(time(r.notBefore), time(r.notAfter)),
    name(r.subject),
    r.subjectKey.export({ type: 'spki', format: 'der' }),
    explicit(3, seq(...extensions)),
  );
  const signature = sign(alg.hash, tbs, r.issuerKey);
  return seq(tbs, alg.id, bits(signature));
}

/** PEM armour of a DER certificate. */
export function certificatePem(der: Uint8Array): string {
  const b64 = Buffer.from(der).toString('base64');
  return `-----BEGIN CERTIFICATE-----\n${b64.replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
}
