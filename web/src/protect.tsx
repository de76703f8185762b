import { zipSync } from 'fflate';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, getBlob, postJson, uploadImage, type AccountInfo, type Batch, type CredentialsOutcome, type MarkAnswer, type VerifyReport } from './api';
import { DropZone } from './dropzone';
import { BeforeAfter } from './report';
import { formatBytes, fromBase64, percent, saveBlob, sniff } from './util';

type State = 'waiting' | 'uploading' | 'processing' | 'done' | 'failed';

interface Result {
  url: string;
  blob: Blob;
  filename: string;
  mimeType: string;
  bytes: number;
  sha256: string;
  layers: string[];
  before: VerifyReport;
  after: VerifyReport;
  credentials: CredentialsOutcome;
  warnings: MarkAnswer['warnings'];
}

interface Item {
  id: number;
  file: File;
  state: State;
  sent: number;
  message?: string;
  /** Refused in the page (not an image): never sent, never retried. */
  local?: boolean;
  result?: Result;
}

let nextId = 1;

/** "Keep originals in my vault": each image of the batch is sent with this query (docs/vault.md). */
const KEEP_IN_VAULT = '?vault=keep';

const NOT_AN_IMAGE = 'This file is not a JPEG, PNG or WebP image (judged by its content, not its name), so it was not sent.';

/** What happened to a file's Content Credentials (C2PA), when it had any. */
const CREDENTIALS: Record<Exclude<CredentialsOutcome, 'none'>, string> = {
  updated: 'Kept: an update manifest signed by this server records the change',
  'parent-invalid': 'They did not validate when they came; an update manifest records the change (see the warning)',
  unverified: 'Carried over; their validity depends on checks that need a network (see the warning)',
  unchanged: 'Unchanged (the file was already marked)',
  invalidated: 'No longer valid after marking (see the warning)',
};

const STATUS: Record<State, string> = {
  waiting: 'Waiting',
  uploading: 'Uploading',
  processing: 'Processing on the server',
  done: 'Protected',
  failed: 'Failed',
};

export function ProtectView({ apiKey, info, vaultOn, onUsage }: { apiKey: string; info: AccountInfo; vaultOn: boolean; onUsage: () => void }) {
  const limit = info.limits.batchSize;
  const [items, setItems] = useState<Item[]>([]);
  const [provenance, setProvenance] = useState(true);
  const [fingerprint, setFingerprint] = useState(true);
  // Off by default: each is a signal beyond the IPTC field that not every user wants written (docs/signals.md).
  const [tdmrep, setTdmrep] = useState(false);
  const [contentCredentials, setContentCredentials] = useState(false);
  // Ticked whenever the account's vault is on (the user turned it on to keep originals); untick for one batch.
  const [keepOriginals, setKeepOriginals] = useState(true);
  const [notice, setNotice] = useState<string>('');
  const [running, setRunning] = useState(false);
  const [batch, setBatch] = useState<Batch | undefined>();
  const [zipping, setZipping] = useState(false);
  const itemsRef = useRef(items);
  itemsRef.current = items;

  // Object URLs of a batch live until the next batch or the page goes away.
  useEffect(() => () => revokeAll(itemsRef.current), []);

  const update = (id: number, patch: Partial<Item>) => setItems((list) => list.map((it) => (it.id === id ? { ...it, ...patch } : it)));

  const pick = (files: File[]) => {
    if (running) return;
    const fresh = batch !== undefined; // a finished batch: the next pick starts a new one
    const kept = fresh ? [] : itemsRef.current;
    if (kept.length + files.length > limit) {
      const total = kept.length + files.length;
      setNotice(`You chose ${total} files, but a batch holds at most ${limit} images. Nothing was added: choose ${limit} or fewer.`);
      return;
    }
    if (fresh) {
      revokeAll(itemsRef.current);
      setBatch(undefined);
    }
    const added = files.map((file) => ({ id: nextId++, file, state: 'waiting' as State, sent: 0 }));
    setNotice(files.length ? `${kept.length + files.length} of at most ${limit} files chosen. Choose the layers, then Protect.` : '');
    setItems([...kept, ...added]);
    // Files that are not images (by their first bytes, as the server judges them) are refused here, so
    // they cost no upload, no batch slot and no protection.
    for (const it of added) {
      void sniff(it.file).then((format) => {
        if (!format) update(it.id, { state: 'failed', local: true, message: NOT_AN_IMAGE });
      });
    }
  };

  const remove = (id: number) => setItems((list) => list.filter((it) => it.id !== id));

  const run = async (todo: Item[], into?: Batch) => {
    setRunning(true);
    setNotice('');
    try {
      let b = into;
      if (!b) {
        try {
          b = await postJson<Batch>(apiKey, '/api/v1/dashboard/batches', {
            size: todo.length,
            provenance,
            fingerprint,
            tdmrep,
            contentCredentials,
          });
        } catch (err) {
          setNotice(err instanceof ApiError ? err.message : String(err));
          return;
        }
        setBatch(b);
      }
      const queue = [...todo];
      const path = `/api/v1/dashboard/batches/${b.id}/images${vaultOn && keepOriginals ? KEEP_IN_VAULT : ''}`;
      const one = async (item: Item) => {
        if (item.file.size > info.limits.maxUploadBytes) {
          update(item.id, {
            state: 'failed',
            message: `This file is ${formatBytes(item.file.size)}; the limit is ${formatBytes(info.limits.maxUploadBytes)} per image.`,
          });
          return;
        }
        update(item.id, { state: 'uploading', sent: 0, message: undefined });
        try {
          const answer = await uploadImage<MarkAnswer>(apiKey, path, item.file, {
            progress: (f) => update(item.id, { sent: f }),
            uploaded: () => update(item.id, { state: 'processing', sent: 1 }),
          });
          const blob = new Blob([fromBase64(answer.imageBase64)], { type: answer.mimeType });
          const result: Result = {
            url: URL.createObjectURL(blob),
            blob,
            filename: answer.filename,
            mimeType: answer.mimeType,
            bytes: answer.bytes,
            sha256: answer.sha256,
            layers: answer.layers,
            before: answer.before,
            after: answer.after,
            credentials: answer.credentials,
            warnings: answer.warnings,
          };
          update(item.id, { state: 'done', result });
        } catch (err) {
          // The server's own message, after a plain statement of what happened (its messages can be
          // technical, e.g. "JPEG: no image data (SOS) found").
          update(item.id, { state: 'failed', message: `Could not protect this file: ${err instanceof ApiError ? err.message : String(err)}` });
        }
      };
      const lanes = Math.max(1, Math.min(info.limits.concurrency, queue.length));
      await Promise.all(
        Array.from({ length: lanes }, async () => {
          for (let item = queue.shift(); item; item = queue.shift()) await one(item);
        }),
      );
    } finally {
      setRunning(false);
      onUsage();
    }
  };

  const start = (e: Event) => {
    e.preventDefault();
    void (async () => {
      // The same check as at pick time, awaited: a click right after picking must not send a non-image.
      const todo: Item[] = [];
      for (const it of items.filter((x) => x.state === 'waiting')) {
        if (await sniff(it.file)) todo.push(it);
        else update(it.id, { state: 'failed', local: true, message: NOT_AN_IMAGE });
      }
      if (todo.length === 0) {
        setNotice('Choose one or more JPEG, PNG or WebP images first.');
        return;
      }
      await run(todo);
    })();
  };

  const retry = () => {
    const failed = items.filter((it) => it.state === 'failed' && !it.local);
    if (batch && failed.length) void run(failed, batch);
  };

  const done = items.filter((it) => it.state === 'done' && it.result);
  const failedCount = items.filter((it) => it.state === 'failed').length;
  const retryable = items.filter((it) => it.state === 'failed' && !it.local).length;

  const downloadAll = () => {
    setZipping(true);
    void (async () => {
      try {
        const files: Record<string, Uint8Array> = {};
        for (const it of done) {
          const r = it.result!;
          files[uniqueName(files, r.filename)] = new Uint8Array(await r.blob.arrayBuffer());
        }
        // Images are compressed already: store them (level 0), which is fast and no larger.
        const zip = zipSync(files, { level: 0 });
        saveBlob(new Blob([zip as Uint8Array<ArrayBuffer>], { type: 'application/zip' }), `optmark-${batch?.id.slice(0, 8) ?? 'batch'}.zip`);
      } finally {
        setZipping(false);
      }
    })();
  };

  const receipt = () => {
    if (!batch) return;
    void getBlob(apiKey, `/api/v1/dashboard/batches/${batch.id}/receipt`).then(
      (blob) => saveBlob(blob, `optmark-receipt-${batch.id.slice(0, 8)}.pdf`),
      (err: unknown) => setNotice(err instanceof ApiError ? err.message : String(err)),
    );
  };

  return (
    <section aria-labelledby="protect-title">
      <h2 id="protect-title">Protect images</h2>
      <p class="lead">
        Every image gets the IPTC/PLUS opt-out field (AI/ML training prohibited). Up to {limit} JPEG, PNG or WebP images per batch, at most{' '}
        {formatBytes(info.limits.maxUploadBytes)} each. Each image counts as one protection this month.
      </p>
      <form onSubmit={start} class="stack">
        <DropZone id="protect-files" label="Choose images" hint={`Drop up to ${limit} images here, or`} disabled={running} onFiles={pick} />
        <fieldset disabled={running}>
          <legend>Layers (the opt-out field is always written)</legend>
          <div class="check">
            <input type="checkbox" id="layer-provenance" checked={provenance} onChange={(e) => setProvenance(e.currentTarget.checked)} />
            <label for="layer-provenance">Provenance</label>
            <span class="hint">a tag signed by this server over the image and its opt-out value</span>
          </div>
          <div class="check">
            <input type="checkbox" id="layer-fingerprint" checked={fingerprint} onChange={(e) => setFingerprint(e.currentTarget.checked)} />
            <label for="layer-fingerprint">Fingerprint</label>
            <span class="hint">an experimental mark in the pixels (re-encodes them)</span>
          </div>
          <div class="check">
            <input type="checkbox" id="layer-tdmrep" checked={tdmrep} onChange={(e) => setTdmrep(e.currentTarget.checked)} />
            <label for="layer-tdmrep">TDMRep</label>
            <span class="hint">the W3C TDM reservation (tdm:reservation 1) in the XMP, beside the opt-out field</span>
          </div>
          <div class="check">
            <input
              type="checkbox"
              id="layer-content-credentials"
              checked={contentCredentials}
              onChange={(e) => setContentCredentials(e.currentTarget.checked)}
            />
            <label for="layer-content-credentials">Content Credentials</label>
            <span class="hint">a C2PA manifest signed by this server: AI training and mining not allowed</span>
          </div>
        </fieldset>
        {vaultOn && (
          <div class="check">
            <input type="checkbox" id="keep-originals" checked={keepOriginals} disabled={running} onChange={(e) => setKeepOriginals(e.currentTarget.checked)} />
            <label for="keep-originals">Keep originals in my vault</label>
            <span class="hint">the original and the marked file of each image, encrypted, in your Private Vault</span>
          </div>
        )}
        <div class="row">
          <button type="submit" class="primary" disabled={running}>
            {running ? 'Protecting…' : 'Protect'}
          </button>
          {batch && !running && retryable > 0 && (
            <button type="button" onClick={retry}>
              Retry {retryable} failed
            </button>
          )}
        </div>
      </form>
      <p role="status" aria-live="polite" class="notice">
        {notice}
      </p>

      {items.length > 0 && (
        <>
          <h3>
            Files ({done.length} of {items.length} protected{failedCount ? `, ${failedCount} failed` : ''})
          </h3>
          {done.length > 0 && !running && (
            <div class="row">
              <button type="button" onClick={downloadAll} disabled={zipping}>
                {zipping ? 'Building the ZIP…' : `Download all (${done.length}) as ZIP`}
              </button>
              <button type="button" onClick={receipt}>
                PDF receipt
              </button>
            </div>
          )}
          <ul class="files">
            {items.map((it) => (
              <FileRow key={it.id} item={it} onRemove={running || batch ? undefined : () => remove(it.id)} />
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function FileRow({ item, onRemove }: { item: Item; onRemove: (() => void) | undefined }) {
  const r = item.result;
  // Always a determinate bar: the upload's share, then full once every byte is sent (the badge says the
  // server is working). An indeterminate bar animates without end, and repainting it costs the browser more
  // CPU than the rest of the page, CPU the server's workers need on a small machine (bench/dashboard.ts).
  const progress = item.state === 'uploading' ? item.sent : 1;
  return (
    <li class={`file ${item.state}`}>
      <div class="file-head">
        {r ? (
          <img class="thumb" src={r.url} alt="" width={72} height={72} loading="lazy" decoding="async" />
        ) : (
          <div class="thumb placeholder" aria-hidden="true" />
        )}
        <div class="file-main">
          <p class="name">{item.file.name}</p>
          <p class="status">
            <span class={`badge ${item.state}`}>{STATUS[item.state]}</span>
            {item.state === 'uploading' && ` ${percent(item.sent)}`}
            {item.state === 'failed' && item.message && <span class="error"> {item.message}</span>}
          </p>
          {(item.state === 'uploading' || item.state === 'processing' || item.state === 'done') && (
            <progress
              max={1}
              value={progress}
              aria-label={`${item.file.name}: ${STATUS[item.state]}${item.state === 'uploading' ? ` ${percent(item.sent)}` : ''}`}
            />
          )}
        </div>
        {onRemove && (
          <button type="button" class="link" onClick={onRemove} aria-label={`Remove ${item.file.name}`}>
            Remove
          </button>
        )}
      </div>
      {r && (
        <div class="result">
          <dl class="facts">
            <dt>Produced file</dt>
            <dd>{r.filename}</dd>
            <dt>Type and size</dt>
            <dd>
              {r.mimeType}, {formatBytes(r.bytes)}
            </dd>
            <dt>SHA-256</dt>
            <dd>
              <code class="hash">{r.sha256}</code>
            </dd>
            {r.credentials !== 'none' && (
              <>
                <dt>Content Credentials</dt>
                <dd>{CREDENTIALS[r.credentials]}</dd>
              </>
            )}
          </dl>
          {r.warnings.length > 0 && (
            <ul class="warnings" aria-label={`Warnings for ${item.file.name}`}>
              {r.warnings.map((w) => (
                <li key={w.code}>{w.message}</li>
              ))}
            </ul>
          )}
          <BeforeAfter before={r.before} after={r.after} />
          <a class="button" href={r.url} download={r.filename}>
            Download {r.filename}
          </a>
        </div>
      )}
    </li>
  );
}

function uniqueName(taken: Record<string, unknown>, name: string): string {
  if (!(name in taken)) return name;
  const dot = name.lastIndexOf('.');
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const ext = dot > 0 ? name.slice(dot) : '';
  for (let i = 2; ; i++) if (!(`${stem}-${i}${ext}` in taken)) return `${stem}-${i}${ext}`;
}

function revokeAll(items: Item[]): void {
  for (const it of items) if (it.result) URL.revokeObjectURL(it.result.url);
}
