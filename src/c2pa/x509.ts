/**
 * Issues the server's own C2PA signing identity with @peculiar/x509: a private CA certificate and an
 * end-entity certificate it signs, both meeting the C2PA certificate profile as c2pa-rs checks it (X.509
 * v3, ECDSA P-256 with SHA-256; the CA with basicConstraints cA and keyCertSign/cRLSign; the end entity
 * not a CA, keyUsage digitalSignature only, extKeyUsage emailProtection and documentSigning, never
 * anyExtendedKeyUsage; both with subject and authority key identifiers).
 */
import { KeyObject, webcrypto } from 'node:crypto';
// @peculiar/x509 resolves its parts through tsyringe, which needs the Reflect metadata API at load.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

const EKU_EMAIL_PROTECTION = '1.3.6.1.5.5.7.3.4';
const EKU_DOCUMENT_SIGNING = '1.3.6.1.5.5.7.3.36';
const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const ECDSA_SHA256 = { name: 'ECDSA', hash: 'SHA-256' } as const;

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
const crypto = webcrypto;

export interface IssuedName {
  commonName: string;
  organization: string;
}

/** The name as an RDN sequence, organization first (as the certificates optmark issued before had it). */
const nameOf = (n: IssuedName): x509.JsonName => [{ '2.5.4.10': [n.organization] }, { '2.5.4.3': [n.commonName] }];

/** A positive 16-byte serial number, never zero (RFC 5280 4.1.2.2), in hex. */
function serialNumber(): string {
  const serial = crypto.getRandomValues(new Uint8Array(16));
  serial[0] = (serial[0]! & 0x7f) | 0x01;
  return Buffer.from(serial).toString('hex');
}

/** An extractable ECDSA P-256 key pair for a certificate. */
export async function generateEcKeys(): Promise<CryptoKeyPair> {
  return (await crypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as CryptoKeyPair;
}

export interface CertificateRequest {
  subject: IssuedName;
  subjectKey: CryptoKey;
  issuer: IssuedName;
  /** The issuer's private key (the subject's own for a self-signed CA). */
  issuerKey: CryptoKey;
  issuerPublicKey: CryptoKey;
  ca: boolean;
  notBefore: Date;
  notAfter: Date;
}

/** A DER X.509 v3 certificate. */
export async function issueCertificate(r: CertificateRequest): Promise<Uint8Array> {
  const usages = r.ca ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign : x509.KeyUsageFlags.digitalSignature;
  const extensions: x509.Extension[] = [
    r.ca ? new x509.BasicConstraintsExtension(true, 0, true) : new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(usages, true),
    ...(r.ca ? [] : [new x509.ExtendedKeyUsageExtension([EKU_EMAIL_PROTECTION, EKU_DOCUMENT_SIGNING], false)]),
    await x509.SubjectKeyIdentifierExtension.create(r.subjectKey, false, crypto),
    await x509.AuthorityKeyIdentifierExtension.create(r.issuerPublicKey, false, crypto),
  ];
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: serialNumber(),
      subject: nameOf(r.subject),
      issuer: nameOf(r.issuer),
      notBefore: r.notBefore,
      notAfter: r.notAfter,
      signingAlgorithm: ECDSA_SHA256,
      publicKey: r.subjectKey,
      signingKey: r.issuerKey,
      extensions,
    },
    crypto,
  );
  return new Uint8Array(cert.rawData);
}

/** PEM armour of a DER certificate. */
export function certificatePem(der: Uint8Array): string {
  return `${x509.PemConverter.encode(der, 'CERTIFICATE').replace(/\r\n/g, '\n')}\n`;
}

/** A WebCrypto private key as PKCS#8 PEM. */
export function privateKeyPem(key: CryptoKey): string {
  return KeyObject.from(key).export({ type: 'pkcs8', format: 'pem' }).toString();
}
