/**
 * protect keeps Content Credentials valid (issue #21, docs/c2pa.md): on the corpus's two C2PA files and
 * on PNG, WebP and JPEG files given credentials here by another signer, OPTMARK_C2PA=update adds an
 * update manifest that the reference reader (c2pa-rs as wasm, the same reader the checks use) reports
 * valid, active, with the previous manifest as its parentOf ingredient, a cawg.training-mining
 * assertion and the c2pa.edited.metadata action; verify then says optedOut, c2pa.valid and notAllowed.
 * refuse answers content_credentials_present, invalidate writes as before with a warning, and files
 * without credentials come out byte for byte as the engine alone makes them, in every mode.
 */
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasManifestStore } from '../src/c2pa/detect.js';
import { C2PA_DIR, CA_FILE, IDENTITY_FILE, generateIdentity, loadC2paIdentity, type SignerIdentity } from '../src/c2pa/identity.js';
import { trainingEntriesFor } from '../src/c2pa/update.js';
import { OptmarkError } from '../src/errors.js';
import { requireFormat } from '../src/formats/index.js';
import { protect } from '../src/marking/engine.js';
import { type CredentialsPolicy, protectWithCredentials } from '../src/pipeline/credentials.js';
import { runMark } from '../src/pipeline/mark.js';
import { contentDigest, keyIdOf, signingTime, verifyProvenance } from '../src/provenance/index.js';
import { signFields, writeTag } from '../src/provenance/tag.js';
import { DEFAULT_TOKEN, tokenUri } from '../src/xmp/index.js';
import { expectUpdated, read, withCredentials } from './helpers/c2pa.js';
import { pngChunk, pngWith } from './helpers/containers.js';
import { smallImage } from './helpers/images.js';

const CORPUS = join(__dirname, '..', '..', 'shared', 'corpus');
const haveCorpus = existsSync(join(CORPUS, 'c2pa_CA.jpg'));
const corpusFile = (name: string): Uint8Array => new Uint8Array(readFileSync(join(CORPUS, name)));

let dataDir: string;
let server: SignerIdentity;
const policy = (mode: CredentialsPolicy['mode']): CredentialsPolicy => ({ mode, identity: async () => server });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'optmark-c2pa-'));
  server = await loadC2paIdentity({ dataDir });
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('OPTMARK_C2PA=update on the corpus files', () => {
  it.runIf(haveCorpus)(
    'c2pa_CA.jpg: valid update manifest, parentOf the previous one, trainingMining notAllowed',
    async () => {
      const input = corpusFile('c2pa_CA.jpg');
      const out = await protectWithCredentials(input, {}, policy('update'));
      expect(out.outcome).toBe('updated');
      expect(out.warnings.map((w) => w.code)).toEqual(['content_credentials_updated']);
      expect(out.warnings[0]!.message).toContain(server.subject);
      await expectUpdated('jpeg', input, out.pieces[0]!);
    },
    60_000,
  );

  it.runIf(haveCorpus)(
    'c2pa_C_with_CAWG_data.jpg: the parent CAWG entries are carried over (ai_inference stays notAllowed), ours added',
    async () => {
      const input = corpusFile('c2pa_C_with_CAWG_data.jpg');
      const out = await protectWithCredentials(input, {}, policy('update'));
      const after = await expectUpdated('jpeg', input, out.pieces[0]!);
      const entries = after.manifests[after.active_manifest]!.assertions.find((a) => a.label === 'cawg.training-mining')!.data.entries;
      expect(entries).toEqual({
        'cawg.ai_inference': { use: 'notAllowed' },
        'cawg.ai_generative_training': { use: 'notAllowed' },
        'cawg.ai_training': { use: 'notAllowed' },
      });
    },
    60_000,
  );

  it.runIf(haveCorpus)(
    'the chain is the one generated in the data directory: trusting its CA makes the reader say Trusted',
    async () => {
      const input = corpusFile('c2pa_CA.jpg');
      const out = (await protectWithCredentials(input, {}, policy('update'))).pieces[0]!;
      const ca = readFileSync(join(dataDir, C2PA_DIR, CA_FILE), 'utf8');
      const trusted = await read('jpeg', out, ca);
      expect(trusted.validation_state).toBe('Trusted');
      // Without the anchor, valid but untrusted (the signer is on no list the reader knows).
      const plain = await read('jpeg', out);
      expect(plain.validation_state).toBe('Valid');
      expect(plain.validation_status?.map((s) => s.code)).toEqual(['signingCredential.untrusted']);
    },
    60_000,
  );
});

describe('OPTMARK_C2PA=update on PNG, WebP and JPEG files with credentials built here', () => {
  for (const format of ['png', 'webp', 'jpeg'] as const) {
    it(`${format}: the reader reports the update valid and verify reads it`, async () => {
      const input = await withCredentials(format, await smallImage(format));
      expect((await read(format, input)).validation_state).toBe('Valid');
      const out = await protectWithCredentials(input, {}, policy('update'));
      expect(out.outcome).toBe('updated');
      await expectUpdated(format, input, out.pieces[0]!);
      // Protecting the output again: already marked, so it comes back as it is, credentials untouched.
      const again = await protectWithCredentials(out.pieces[0]!, {}, policy('update'));
      expect(again.outcome).toBe('unchanged');
      expect(Buffer.from(again.pieces[0]!).equals(Buffer.from(out.pieces[0]!))).toBe(true);
    }, 60_000);
  }
});

describe('OPTMARK_C2PA=refuse and invalidate', () => {
  it('refuse: content_credentials_present, for any file with a manifest store', async () => {
    const input = await withCredentials('png', await smallImage('png'));
    const err = await protectWithCredentials(input, {}, policy('refuse')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OptmarkError);
    expect((err as OptmarkError).code).toBe('content_credentials_present');
  }, 60_000);

  it('invalidate: the engine bytes, a warning, and the reader reports the broken hard binding', async () => {
    const input = await withCredentials('jpeg', await smallImage('jpeg'));
    const out = await protectWithCredentials(input, {}, policy('invalidate'));
    expect(out.outcome).toBe('invalidated');
    expect(out.warnings.map((w) => w.code)).toEqual(['content_credentials_invalidated']);
    expect(Buffer.from(out.pieces[0] ?? []).length > 0).toBe(true);
    const bytes = Buffer.concat(out.pieces);
    expect(bytes.equals(Buffer.from(protect(input).bytes))).toBe(true);
    const after = await read('jpeg', bytes);
    expect(after.validation_state).toBe('Invalid');
    expect(after.validation_status?.map((s) => s.code)).toContain('assertion.dataHash.mismatch');
    // An update of such a file has an outcome of its own (issue #37: `updated` would say "kept valid");
    // the warning says the parent did not validate, and that the new manifest itself does.
    const updated = await protectWithCredentials(bytes, { token: 'DMI-PROHIBITED' }, policy('update'));
    expect(updated.outcome).toBe('parent-invalid');
    expect(updated.warnings.map((w) => w.code)).toEqual(['content_credentials_parent_invalid']);
    expect(updated.warnings[0]!.message).toContain('did not validate when it came (assertion.dataHash.mismatch');
    expect(updated.warnings[0]!.message).toContain('The new manifest validates');
    expect(updated.warnings[0]!.message).not.toMatch(/kept|stay valid/);
    const report = await read('jpeg', updated.pieces[0]!);
    const entries = report.manifests[report.active_manifest]!.assertions.find((a) => a.label === 'cawg.training-mining')!.data.entries;
    expect(entries).toEqual({
      'cawg.ai_training': { use: 'notAllowed' },
      'cawg.ai_generative_training': { use: 'notAllowed' },
      'cawg.data_mining': { use: 'notAllowed' },
    });
    // The parent's failure stays on record in its ingredient (validation results); the new manifest validates.
    expect(report.validation_state).toBe('Valid');
  }, 60_000);
});

describe('a manifest store that cannot be updated', () => {
  it('unreadable (a well-framed store the reader cannot use in a PNG caBX chunk): marked as by the engine alone, with a warning saying why, not refused', async () => {
    const jumd = Buffer.concat([Buffer.from('6332706100110010800000aa00389b71', 'hex'), Buffer.from([0x03]), Buffer.from('c2pa\0')]);
    const box = (type: string, body: Buffer): Buffer => Buffer.concat([Buffer.from([0, 0, 0, body.length + 8]), Buffer.from(type, 'latin1'), body]);
    const store = box('jumb', Buffer.concat([box('jumd', jumd), box('cbor', Buffer.from([0x01]))]));
    const input = pngWith(await smallImage('png'), [pngChunk('caBX', store)], 'beforeIdat');
    const out = await protectWithCredentials(input, {}, policy('update'));
    expect(out.outcome).toBe('invalidated');
    expect(out.warnings.map((w) => w.code)).toEqual(['content_credentials_invalidated']);
    expect(out.warnings[0]!.message).toContain('could not be updated');
    expect(Buffer.concat(out.pieces).equals(Buffer.from(protect(input).bytes))).toBe(true);
  }, 60_000);

  it('lengths the store does not hold (garbage in a caBX chunk): 422 content_credentials_malformed, nothing written, the reader never asked (issue #37)', async () => {
    const input = pngWith(await smallImage('png'), [pngChunk('caBX', Buffer.from('not jumbf'))], 'beforeIdat');
    await expect(protectWithCredentials(input, {}, policy('update'))).rejects.toMatchObject({ code: 'content_credentials_malformed' });
  });
});

describe('files without Content Credentials are edited exactly as before', () => {
  for (const format of ['jpeg', 'png', 'webp'] as const) {
    it(`${format}: same bytes and warnings as the engine alone, outcome none, in every mode, the signer never asked`, async () => {
      const input = await smallImage(format);
      const engine = protect(input);
      for (const mode of ['update', 'refuse', 'invalidate'] as const) {
        const out = await protectWithCredentials(input, {}, { mode, identity: () => Promise.reject(new Error('asked for a signer')) });
        expect(out.outcome).toBe('none');
        expect(Buffer.concat(out.pieces).equals(Buffer.from(engine.bytes))).toBe(true);
        expect(out.warnings).toEqual(engine.warnings);
      }
    });
  }
});

describe('the layer path (dashboard, optmark mark) with a credentials policy', () => {
  const tagKey = generateKeyPairSync('ed25519').privateKey;
  const publicKey = createPublicKey(tagKey);
  const signingKey = { keyId: keyIdOf(publicKey), privateKey: tagKey, publicKey };
  const ctx = { maxPixels: 50_000_000, signingKey: async () => signingKey, fingerprintSecret: async () => new Uint8Array(32).fill(7) };
  const provenanceOf = (bytes: Uint8Array) => verifyProvenance(bytes, { find: async (id) => (id === signingKey.keyId ? publicKey : undefined) });

  for (const format of ['jpeg', 'png', 'webp'] as const) {
    it(`${format}, both layers, update: the credentials stay valid (c2pa.edited) and so does the provenance tag`, async () => {
      const input = await withCredentials(format, await smallImage(format, 480, 320));
      const out = await runMark(input, { provenance: true, fingerprint: true }, ctx, policy('update'));
      expect(out.credentials).toBe('updated');
      expect(out.warnings?.map((w) => w.code)).toEqual(['content_credentials_updated']);
      expect(out.warnings?.[0]?.message).toContain('fingerprint and metadata');
      await expectUpdated(format, input, out.bytes, 'c2pa.edited');
      // The tag leaves the manifest store out of its digest, so the update manifest added after it keeps it valid.
      expect((await provenanceOf(out.bytes)).reason).toBe('valid');
    }, 60_000);
  }

  it.runIf(haveCorpus)(
    'c2pa_CA.jpg, provenance only: c2pa.edited.metadata, the tag valid',
    async () => {
      const input = corpusFile('c2pa_CA.jpg');
      const out = await runMark(input, { provenance: true, fingerprint: false }, ctx, policy('update'));
      expect(out.credentials).toBe('updated');
      await expectUpdated('jpeg', input, out.bytes);
      expect((await provenanceOf(out.bytes)).reason).toBe('valid');
    },
    60_000,
  );

  it('refuse: content_credentials_present before any layer work; a file without credentials is marked', async () => {
    const input = await withCredentials('jpeg', await smallImage('jpeg', 480, 320));
    const never = { ...ctx, signingKey: () => Promise.reject(new Error('layer work')), fingerprintSecret: () => Promise.reject(new Error('layer work')) };
    const err = await runMark(input, { provenance: true, fingerprint: true }, never, policy('refuse')).catch((e: unknown) => e);
    expect((err as OptmarkError).code).toBe('content_credentials_present');
    const plain = await runMark(await smallImage('jpeg'), { provenance: false, fingerprint: false }, ctx, policy('refuse'));
    expect(plain.credentials).toBe('none');
    expect(plain.warnings).toEqual([]);
  }, 60_000);

  it('invalidate with the fingerprint: the re-encode leaves the store out, and the warning says so', async () => {
    const input = await withCredentials('jpeg', await smallImage('jpeg', 480, 320));
    const out = await runMark(input, { provenance: false, fingerprint: true }, ctx, policy('invalidate'));
    expect(out.credentials).toBe('invalidated');
    expect(out.warnings?.map((w) => w.code)).toEqual(['content_credentials_invalidated']);
    expect(out.warnings?.[0]?.message).toContain('leaves the manifest store out');
    expect(hasManifestStore('jpeg', out.bytes)).toBe(false);
  }, 60_000);

  it('no credentials: the same bytes as without a policy, outcome none, the signer never asked', async () => {
    const input = await smallImage('png');
    const out = await runMark(input, { provenance: false, fingerprint: false }, ctx, { mode: 'update', identity: () => Promise.reject(new Error('asked')) });
    expect(out.credentials).toBe('none');
    expect(Buffer.from(out.bytes).equals(Buffer.from((await runMark(input, { provenance: false, fingerprint: false }, ctx)).bytes))).toBe(true);
  });

  it('a tag signed before the store was left out of the digest (over the store) still verifies', async () => {
    const input = await withCredentials('png', await smallImage('png'));
    const png = requireFormat(input);
    const fields = { keyId: signingKey.keyId, signedAt: signingTime(new Date()), dataMining: tokenUri(DEFAULT_TOKEN) };
    const old = signFields({ ...fields, contentDigest: contentDigest(png, input, { withManifestStore: true }) }, tagKey);
    const marked = protect(input, { edit: (doc) => writeTag(doc, old) }).bytes;
    expect((await provenanceOf(marked)).reason).toBe('valid');
    // ... and the digest binds the content: a tag over other content does not.
    const other = signFields({ ...fields, contentDigest: contentDigest(png, await smallImage('png', 33, 17)) }, tagKey);
    expect((await provenanceOf(protect(input, { edit: (doc) => writeTag(doc, other) }).bytes)).reason).toBe('digest_mismatch');
  }, 60_000);
});

describe('the signing identity', () => {
  it('generated once in the data directory: identity.pem 0600, a CA and an end-entity certificate meeting the profile', async () => {
    const file = join(dataDir, C2PA_DIR, IDENTITY_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, C2PA_DIR)).mode & 0o777).toBe(0o700);
    const again = await loadC2paIdentity({ dataDir });
    expect(Buffer.from(again.chain[0]!).equals(Buffer.from(server.chain[0]!))).toBe(true);
    expect(server.chain).toHaveLength(2);
    expect(server.alg).toBe('es256');
    const { X509Certificate } = await import('node:crypto');
    const [leaf, ca] = server.chain.map((c) => new X509Certificate(c));
    expect(leaf!.ca).toBe(false);
    expect(ca!.ca).toBe(true);
    expect(leaf!.verify(ca!.publicKey)).toBe(true);
    expect(leaf!.keyUsage).toEqual(expect.arrayContaining(['1.3.6.1.5.5.7.3.4', '1.3.6.1.5.5.7.3.36']));
  });

  it.runIf(haveCorpus)(
    'an identity.pem issued by the earlier hand-encoded DER generator keeps loading and signs updates the reader validates',
    async () => {
      // test/fixtures/c2pa-identity-handmade.pem: made by the DER encoder optmark issued its identities with
      // before @peculiar/x509 (a throwaway test key). Data directories hold such files: they must keep working.
      const dir = mkdtempSync(join(tmpdir(), 'optmark-c2pa-old-'));
      try {
        const { cpSync, mkdirSync } = await import('node:fs');
        mkdirSync(join(dir, C2PA_DIR), { mode: 0o700 });
        cpSync(join(__dirname, 'fixtures', 'c2pa-identity-handmade.pem'), join(dir, C2PA_DIR, IDENTITY_FILE));
        const before = readFileSync(join(dir, C2PA_DIR, IDENTITY_FILE));
        const old = await loadC2paIdentity({ dataDir: dir });
        expect(old.subject).toContain('optmark C2PA signer fixture');
        expect(readFileSync(join(dir, C2PA_DIR, IDENTITY_FILE)).equals(before)).toBe(true);
        const input = corpusFile('c2pa_CA.jpg');
        const out = await protectWithCredentials(input, {}, { mode: 'update', identity: async () => old });
        expect(out.outcome).toBe('updated');
        await expectUpdated('jpeg', input, out.pieces[0]!);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it('a configured chain and key: used as given; one without the other, or a mismatched pair, is refused with a clear error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'optmark-c2pa-conf-'));
    try {
      const { writeFileSync } = await import('node:fs');
      const pem = (await generateIdentity()).identity;
      const key = pem.slice(0, pem.indexOf('-----BEGIN CERTIFICATE-----'));
      const chain = pem.slice(key.length);
      writeFileSync(join(dir, 'key.pem'), key);
      writeFileSync(join(dir, 'chain.pem'), chain);
      const id = await loadC2paIdentity({ dataDir: dir, certFile: join(dir, 'chain.pem'), keyFile: join(dir, 'key.pem') });
      expect(id.generated).toBe(false);
      expect(existsSync(join(dir, C2PA_DIR))).toBe(false);
      await expect(loadC2paIdentity({ dataDir: dir, certFile: join(dir, 'chain.pem') })).rejects.toMatchObject({ code: 'c2pa_identity_invalid' });
      const other = (await generateIdentity()).identity;
      writeFileSync(join(dir, 'other.pem'), other.slice(other.indexOf('-----BEGIN CERTIFICATE-----')));
      await expect(loadC2paIdentity({ dataDir: dir, certFile: join(dir, 'other.pem'), keyFile: join(dir, 'key.pem') })).rejects.toMatchObject({
        code: 'c2pa_identity_invalid',
        message: expect.stringContaining('not the private key'),
      });
      await expect(loadC2paIdentity({ dataDir: dir, certFile: join(dir, 'none.pem'), keyFile: join(dir, 'key.pem') })).rejects.toMatchObject({
        code: 'c2pa_identity_missing',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('DataMining values map to CAWG training entries', () => {
    expect(trainingEntriesFor('DMI-PROHIBITED-AIMLTRAINING')).toEqual({ 'cawg.ai_training': 'notAllowed', 'cawg.ai_generative_training': 'notAllowed' });
    expect(trainingEntriesFor('DMI-PROHIBITED-GENAIMLTRAINING')).toEqual({ 'cawg.ai_generative_training': 'notAllowed' });
    expect(Object.values(trainingEntriesFor('DMI-PROHIBITED'))).toEqual(['notAllowed', 'notAllowed', 'notAllowed']);
    expect(Object.values(trainingEntriesFor('DMI-PROHIBITED-SEECONSTRAINT'))).toEqual(['constrained', 'constrained', 'constrained']);
    expect(trainingEntriesFor('DMI-ALLOWED')).toEqual({});
  });
});
