import { Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, del, getFile, getJson } from './api';
import { formatBytes, formatDate, formatSize, saveBlob } from './util';
import { VaultThumb } from './vault-thumb';
import { objectPath, type VaultInfo, type VaultObject, type VaultPage } from './vault-types';

/** An original and its marked file (one record), or a lone object. */
interface Entry {
  key: string;
  record: string | null;
  original?: VaultObject;
  marked?: VaultObject;
  others: VaultObject[];
}

/** Puts the objects of one record together (the vault stores them one after the other, so they sit side by side). */
function entries(objects: VaultObject[]): Entry[] {
  const out: Entry[] = [];
  const byRecord = new Map<string, Entry>();
  for (const o of objects) {
    let e = o.record ? byRecord.get(o.record) : undefined;
    if (!e) {
      e = { key: o.record ? `r:${o.record}` : `o:${o.id}`, record: o.record, others: [] };
      if (o.record) byRecord.set(o.record, e);
      out.push(e);
    }
    if (o.kind === 'original' && !e.original) e.original = o;
    else if (o.kind === 'marked' && !e.marked) e.marked = o;
    else e.others.push(o);
  }
  return out;
}

const members = (e: Entry): VaultObject[] => [e.original, e.marked, ...e.others].filter((o): o is VaultObject => o !== undefined);

function messageOf(err: unknown): string {
  return err instanceof ApiError ? err.message : String(err);
}

/** The Private Vault: usage, the stored originals and marked files, search, download and delete. */
export function VaultView({ apiKey, vault, onVault }: { apiKey: string; vault: VaultInfo; onVault: () => void }) {
  const [query, setQuery] = useState('');
  const [shown, setShown] = useState<{ q: string; objects: VaultObject[]; next: string | null } | undefined>();
  const [loading, setLoading] = useState(false);
  const [notice, setNotice] = useState('');
  const [error, setError] = useState('');

  const load = async (q: string, cursor?: string) => {
    setLoading(true);
    setError('');
    try {
      const params = new URLSearchParams({ limit: '50' });
      if (q) params.set('q', q);
      if (cursor) params.set('cursor', cursor);
      const page = await getJson<VaultPage>(apiKey, `/api/v1/vault/objects?${params}`);
      setShown((prev) => ({ q, objects: cursor && prev ? [...prev.objects, ...page.objects] : page.objects, next: page.next }));
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    void load('');
  }, []);

  const removed = (ids: string[], what: string) => {
    setShown((s) => s && { ...s, objects: s.objects.filter((o) => !ids.includes(o.id)) });
    setNotice(`Deleted ${what}.`);
    onVault();
  };

  const used = Math.min(vault.usedBytes, vault.limitBytes);
  const list = shown ? entries(shown.objects) : [];
  return (
    <section aria-labelledby="vault-title">
      <h2 id="vault-title">Private Vault</h2>
      <p class="lead">
        Your originals and their marked files, kept with their records, encrypted and visible to this account only. Turn the vault on or off in Settings.
      </p>
      {!vault.enabled && <p class="notice off">The vault is off: new images are not kept. What is stored below stays until you delete it.</p>}
      <div class="meter">
        <h3 id="vault-usage">Storage</h3>
        <progress max={Math.max(1, vault.limitBytes)} value={used} aria-labelledby="vault-usage" aria-describedby="vault-usage-text" />
        <p id="vault-usage-text">
          {formatSize(vault.usedBytes)} of {formatSize(vault.limitBytes)} used ({vault.objects.toLocaleString()} file{vault.objects === 1 ? '' : 's'});{' '}
          {formatSize(Math.max(0, vault.limitBytes - vault.usedBytes))} free.
        </p>
      </div>
      <form
        class="row search"
        onSubmit={(e) => {
          e.preventDefault();
          void load(query.trim());
        }}
      >
        <label for="vault-q">Search by file name, SHA-256 or record</label>
        <input id="vault-q" type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} spellcheck={false} />
        <button type="submit">Search</button>
      </form>
      <p role="status" aria-live="polite" class="notice">
        {error ? (
          <span class="error">{error}</span>
        ) : loading ? (
          'Loading…'
        ) : shown ? (
          `${notice ? `${notice} ` : ''}${shown.objects.length}${shown.next ? '+' : ''} file${shown.objects.length === 1 ? '' : 's'}${shown.q ? ` matching "${shown.q}"` : ''}.`
        ) : (
          ''
        )}
      </p>
      {list.length > 0 && (
        <ul class="vault-list">
          {list.map((e) => (
            <EntryCard key={e.key} entry={e} apiKey={apiKey} onError={setError} onDeleted={removed} />
          ))}
        </ul>
      )}
      {shown?.next && (
        <button type="button" disabled={loading} onClick={() => void load(shown.q, shown.next ?? undefined)}>
          Load more
        </button>
      )}
    </section>
  );
}

function EntryCard({
  entry,
  apiKey,
  onError,
  onDeleted,
}: {
  entry: Entry;
  apiKey: string;
  onError: (m: string) => void;
  onDeleted: (ids: string[], what: string) => void;
}) {
  const [confirming, setConfirming] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const confirmButton = useRef<HTMLButtonElement>(null);
  const deleteButton = useRef<HTMLButtonElement>(null);
  const all = members(entry);
  const head = entry.original ?? entry.marked ?? all[0]!;
  const title = entry.original?.name ?? head.name;
  const what = all.length === 1 ? head.name : `${title} and its marked file`;

  useEffect(() => {
    if (confirming) confirmButton.current?.focus();
  }, [confirming]);

  const save = (o: VaultObject) => {
    void getFile(apiKey, `${objectPath(o.id)}/content`).then(
      ({ blob, name }) => saveBlob(blob, name ?? o.name),
      (err: unknown) => onError(messageOf(err)),
    );
  };

  const remove = async () => {
    setDeleting(true);
    const gone: string[] = [];
    try {
      for (const o of all) {
        await del(apiKey, objectPath(o.id));
        gone.push(o.id);
      }
      onDeleted(gone, what);
    } catch (err) {
      if (gone.length) onDeleted(gone, `part of ${what}`);
      onError(`Deleting ${what} failed: ${messageOf(err)}`);
      setDeleting(false);
      setConfirming(false);
    }
  };

  return (
    <li class="vault-entry">
      <VaultThumb apiKey={apiKey} id={(entry.marked ?? head).id} bytes={(entry.marked ?? head).bytes} mimeType={(entry.marked ?? head).mimeType} />
      <div class="file-main">
        <p class="name">{title}</p>
        <dl class="facts">
          <dt>Stored</dt>
          <dd>{formatDate(head.createdAt)}</dd>
          {all.map((o) => (
            <Fragment key={o.id}>
              <dt>{o.kind === 'original' ? 'Original' : 'Marked file'}</dt>
              <dd>
                {o.kind === 'marked' && o.name !== title ? `${o.name}, ` : ''}
                {o.mimeType}, {formatBytes(o.bytes)}
                <br />
                <code class="hash">{o.sha256}</code>
              </dd>
            </Fragment>
          ))}
          {entry.record && (
            <>
              <dt>Record</dt>
              <dd>
                <code>{entry.record}</code>
              </dd>
            </>
          )}
        </dl>
        <div class="row">
          {all.map((o) => (
            <button key={o.id} type="button" onClick={() => save(o)}>
              {o.kind === 'original' ? 'Download original' : 'Download marked file'}
              <span class="sr-only"> of {title}</span>
            </button>
          ))}
          {!confirming && (
            <button ref={deleteButton} type="button" class="danger" onClick={() => setConfirming(true)}>
              Delete<span class="sr-only"> {title}</span>
            </button>
          )}
        </div>
        {confirming && (
          <fieldset class="confirm">
            <legend>
              Delete {what} from the vault for good? The {all.length === 1 ? 'file is' : 'files are'} removed from storage; the record stays in History.
            </legend>
            <div class="row">
              <button ref={confirmButton} type="button" class="danger" disabled={deleting} onClick={() => void remove()}>
                {deleting ? 'Deleting…' : 'Yes, delete'}
              </button>
              <button
                type="button"
                disabled={deleting}
                onClick={() => {
                  setConfirming(false);
                  setTimeout(() => deleteButton.current?.focus(), 0);
                }}
              >
                Keep
              </button>
            </div>
          </fieldset>
        )}
      </div>
    </li>
  );
}
