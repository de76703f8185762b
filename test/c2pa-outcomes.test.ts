/**
 * What protect says of Content Credentials it updated (issue #37 point 1): `updated` ("the credentials
 * stay valid") only of an output the reference reader validates, from an input that validated; an input
 * whose credentials did not validate gets `parent-invalid` and a warning of its own; validity that hangs
 * on checks needing a network (a CAWG identity issuer's DID, offline) is `unverified`, and says so.
 * The regression files are the fuzzed ones of ../shared/repro/c2pa (read in place, as the corpus is) and
 * the corpus file with its first action set to CBOR null, made here with that folder's generator helpers.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadC2paIdentity, type SignerIdentity } from '../src/c2pa/identity.js';
import { type CredentialState, credentialState } from '../src/c2pa/reader.js';
import { UpdateFailed, updateOutcome } from '../src/c2pa/update.js';
import { type CredentialsPolicy, protectWithCredentials } from '../src/pipeline/credentials.js';
import { noLayers } from '../src/pipeline/layers.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { read } from './helpers/c2pa.js';

const SHARED = join(__dirname, '..', '..', 'shared');
const REPRO = join(SHARED, 'repro', 'c2pa');
const haveRepro = existsSync(join(REPRO, 'model.mjs')) && existsSync(join(SHARED, 'corpus', 'c2pa_CA.jpg'));

let dataDir: string;
let server: SignerIdentity;
const update: CredentialsPolicy = { mode: 'update', identity: async () => server };

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'optmark-c2pa-outcomes-'));
  server = await loadC2paIdentity({ dataDir });
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** c2pa_CA.jpg with its first action's `action` set to CBOR null (mk-actions-null.mjs, with its helpers). */
async function actionNull(): Promise<Uint8Array> {
  const { getStore, withStore } = await import(join(REPRO, 'jumbf.mjs'));
  const { parseStore, enrich, serStore, allBoxes } = await import(join(REPRO, 'model.mjs'));
  const { cborNodes } = await import(join(REPRO, 'trees.mjs'));
  const buf = readFileSync(join(SHARED, 'corpus', 'c2pa_CA.jpg'));
  const tree = enrich(parseStore(getStore('jpeg', buf)));
  const box = allBoxes(tree)
    .map((x: { b: { cbor?: unknown; label?: string } }) => x.b)
    .find((b: { cbor?: unknown; label?: string }) => b.cbor && /^c2pa\.actions/.test(b.label ?? ''));
  let done = false;
  for (const { n } of cborNodes(box.cbor)) {
    if (done || n.t !== 'map') continue;
    for (const pair of n.items) {
      if (pair[0].t === 'tstr' && pair[0].v.toString() === 'action') {
        pair[1] = { t: 'raw', v: Buffer.from([0xf6]) };
        done = true;
        break;
      }
    }
  }
  expect(done).toBe(true);
  return new Uint8Array(withStore('jpeg', buf, serStore(tree)));
}

/** What protect answered and what the reader and verify say of the output. */
async function outcomeOf(input: Uint8Array) {
  const out = await protectWithCredentials(input, {}, update);
  const bytes = Buffer.concat(out.pieces);
  const after = await read('jpeg', bytes);
  const v = await verifyReport(bytes, noLayers);
  return { out, after, v };
}

describe('an input whose credentials did not validate', () => {
  const cases: [string, () => Promise<Uint8Array>][] = [
    ['c2pa_CA.jpg with its first action null (assertion.required.missing)', actionNull],
    ...['ca-mutated-329.jpg', 'ca-mutated-1185.jpg', 'nomining-mutated-177.jpg'].map((f): [string, () => Promise<Uint8Array>] => [
      `repro ${f}`,
      async () => new Uint8Array(readFileSync(join(REPRO, f))),
    ]),
  ];
  for (const [name, make] of cases) {
    it.runIf(haveRepro)(
      `${name}: parent-invalid, a warning that never says kept or valid, and the output as the reader and verify find it`,
      async () => {
        const input = await make();
        expect((await read('jpeg', input)).validation_state).toBe('Invalid');
        const { out, after, v } = await outcomeOf(input);
        expect(out.outcome).toBe('parent-invalid');
        expect(out.warnings.map((w) => w.code)).toEqual(['content_credentials_parent_invalid']);
        const message = out.warnings[0]!.message;
        expect(message).toContain('did not validate when it came');
        expect(message).not.toMatch(/kept|stay valid/);
        // What the warning says of the output is what the reader and verify find.
        expect(after.validation_state).toBe('Invalid');
        expect(message).toContain('The credentials still do not validate (assertion.required.missing');
        expect(v.c2pa).toMatchObject({ present: true, valid: false });
      },
      60_000,
    );
  }
});

describe('valid inputs', () => {
  for (const f of ['c2pa_CA.jpg', 'c2pa_C_with_CAWG_data.jpg']) {
    it.runIf(haveRepro)(
      `${f}: updated, the output validates, and the warning says what valid rests on (offline, untrusted signer)`,
      async () => {
        const { out, after, v } = await outcomeOf(new Uint8Array(readFileSync(join(SHARED, 'corpus', f))));
        expect(out.outcome).toBe('updated');
        expect(after.validation_state).toBe('Valid');
        expect(v.c2pa.valid).toBe(true);
        expect(out.warnings[0]!.message).toContain('offline: no OCSP, remote manifest or DID lookups');
        expect(out.warnings[0]!.message).toContain('signingCredential.untrusted');
      },
      60_000,
    );
  }
});

describe('the outcome from what the reader says of input and output', () => {
  const state = (kind: CredentialState['kind'], failures: string[] = [], untrusted = ['signingCredential.untrusted']): CredentialState => ({
    kind,
    state: kind === 'valid' ? 'Valid' : 'Invalid',
    failures,
    untrusted,
  });

  it('credentialState: untrusted signers are allowed, a DID that needs a network is offline, anything else invalid', () => {
    const report = (validation_state: string, ...codes: string[]) => ({ validation_state, validation_status: codes.map((code) => ({ code })) });
    expect(credentialState(report('Valid', 'signingCredential.untrusted')).kind).toBe('valid');
    const did = credentialState(report('Invalid', 'signingCredential.untrusted', 'cawg.ica.did_unavailable'));
    expect(did).toEqual({ kind: 'offline', state: 'Invalid', failures: ['cawg.ica.did_unavailable'], untrusted: ['signingCredential.untrusted'] });
    expect(credentialState(report('Invalid', 'cawg.ica.did_unavailable', 'assertion.dataHash.mismatch')).kind).toBe('invalid');
    expect(credentialState(report('Invalid')).kind).toBe('invalid');
  });

  it('CAWG identity assertions whose issuer DID cannot be resolved offline: unverified, naming the check and what validity depends on', () => {
    const offline = state('offline', ['cawg.ica.did_unavailable']);
    for (const before of [state('valid'), offline]) {
      const r = updateOutcome(before, offline, 'optmark C2PA signer');
      expect(r.outcome).toBe('unverified');
      expect(r.warning.code).toBe('content_credentials_unverified');
      expect(r.warning.message).toContain("cawg.ica.did_unavailable: a CAWG identity claim's issuer DID was not resolved (it needs a network)");
      expect(r.warning.message).toContain('whether they are valid depends on a reader that makes them');
      expect(r.warning.message).not.toMatch(/kept|stay valid/);
    }
  });

  it('an output that fails where its input did not is never sent: UpdateFailed with valid credentials to lose (409 upstream)', () => {
    const run = () => updateOutcome(state('valid'), state('invalid', ['claimSignature.mismatch']), 'signer');
    expect(run).toThrow(UpdateFailed);
    expect(run).toThrow('the updated credentials do not validate (claimSignature.mismatch)');
    try {
      run();
    } catch (err) {
      expect((err as UpdateFailed).parentValid).toBe(true);
    }
  });

  it('updated only from a valid input to a valid output', () => {
    expect(updateOutcome(state('valid'), state('valid'), 's').outcome).toBe('updated');
    expect(updateOutcome(state('invalid', ['assertion.dataHash.mismatch']), state('valid'), 's').outcome).toBe('parent-invalid');
  });
});
