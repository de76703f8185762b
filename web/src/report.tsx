import type { VerifyReport } from './api';
import { formatDate, percent } from './util';

function optOut(r: VerifyReport): string {
  return r.optedOut ? `Yes (${r.signals.join(', ')})` : 'No';
}

function provenance(r: VerifyReport): string {
  const p = r.provenance;
  if (!p.present) return 'No tag';
  if (p.valid) return 'Valid';
  return p.verifiable ? 'Present, not valid (changed since signing)' : 'Present, not verifiable here';
}

function fingerprint(r: VerifyReport): string {
  const f = r.fingerprint;
  if (f.blocks === 0) return 'Not checked';
  return f.present ? `Present (confidence ${percent(f.confidence)})` : `Not found (${percent(f.confidence)} of ${f.blocks} blocks)`;
}

function credentials(r: VerifyReport): string {
  const c = r.c2pa;
  if (!c?.present) return 'None';
  const use = c.trainingMining ? `, AI training: ${c.trainingMining}` : '';
  return `${c.valid ? 'Valid' : 'Not valid'}${use}`;
}

/** The W3C TDMRep reservation (tdm:reservation 1) is in the XMP. */
function tdmrep(r: VerifyReport): boolean {
  return r.otherSignals?.includes('tdmrep.reservation') ?? false;
}

/** What verify said before and after marking, side by side. */
export function BeforeAfter({ before, after }: { before: VerifyReport; after: VerifyReport }) {
  const rows: Array<[string, string, string]> = [
    ['Opt-out field', optOut(before), optOut(after)],
    ['Provenance', provenance(before), provenance(after)],
    ['Fingerprint', fingerprint(before), fingerprint(after)],
  ];
  if (tdmrep(before) || tdmrep(after)) rows.push(['TDMRep', tdmrep(before) ? 'Reserved' : 'None', tdmrep(after) ? 'Reserved' : 'None']);
  if (before.c2pa?.present || after.c2pa?.present) rows.push(['Content Credentials', credentials(before), credentials(after)]);
  return (
    <table class="before-after">
      <caption class="sr-only">Verify before and after marking</caption>
      <thead>
        <tr>
          <th scope="col">Check</th>
          <th scope="col">Before</th>
          <th scope="col">After</th>
        </tr>
      </thead>
      <tbody>
        {rows.map(([name, b, a]) => (
          <tr key={name}>
            <th scope="row">{name}</th>
            <td>{b}</td>
            <td class={a !== b ? 'changed' : undefined}>{a}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Everything verify reports about one image. */
export function FullReport({ report }: { report: VerifyReport }) {
  const r = report;
  return (
    <dl class="facts">
      <dt>Opt-out field (IPTC/PLUS Data Mining)</dt>
      <dd>{optOut(r)}</dd>
      <dt>Provenance tag</dt>
      <dd>
        {provenance(r)} — present: {yes(r.provenance.present)}, valid: {yes(r.provenance.valid)}, verifiable by this server: {yes(r.provenance.verifiable)}
      </dd>
      <dt>Fingerprint (experimental)</dt>
      <dd>
        {fingerprint(r)} — confidence {r.fingerprint.confidence.toFixed(3)}, blocks examined {r.fingerprint.blocks}
      </dd>
      <dt>Content Credentials (C2PA)</dt>
      <dd>{credentials(r)}</dd>
      <dt>Other reservations</dt>
      <dd>{r.otherSignals?.length ? r.otherSignals.join(', ') : 'None'}</dd>
      <dt>SHA-256 of these bytes</dt>
      <dd>
        <code class="hash">{r.sha256}</code>
      </dd>
      <dt>Dashboard record</dt>
      <dd>
        {r.record
          ? `Marked here on ${formatDate(r.record.markedAt)} from "${r.record.originalName}" as ${r.record.producedName}, layers: ${r.record.layers.join(', ') || 'none'}, key ${r.record.keyPrefix}…`
          : 'No record of these exact bytes.'}
      </dd>
      {r.vault && (
        <>
          <dt>Your vault</dt>
          <dd class="vault-match">
            {r.vault.length === 0 ? (
              'No original in your vault looks like this picture.'
            ) : (
              <ul>
                {r.vault.map((m) => (
                  <li key={m.id}>
                    Looks like your original "{m.name}" ({m.distance === 0 ? 'the same picture' : `${m.distance} of 256 hash bits differ`}
                    {m.record ? `, record ${m.record}` : ''})
                  </li>
                ))}
              </ul>
            )}
          </dd>
        </>
      )}
      {r.warnings && r.warnings.length > 0 && (
        <>
          <dt>Warnings</dt>
          <dd>
            <ul>
              {r.warnings.map((w) => (
                <li key={w.code}>{w.message}</li>
              ))}
            </ul>
          </dd>
        </>
      )}
    </dl>
  );
}

function yes(b: boolean): string {
  return b ? 'yes' : 'no';
}
