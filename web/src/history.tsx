import { useEffect, useState } from 'preact/hooks';
import { ApiError, getBlob, getJson, type MarkRecord } from './api';
import { formatBytes, formatDate, saveBlob } from './util';

interface Page {
  records: MarkRecord[];
  next: string | null;
}

/** Every image the dashboard marked for this account, newest first, with search and export. */
export function HistoryView({ apiKey }: { apiKey: string }) {
  const [query, setQuery] = useState('');
  const [shown, setShown] = useState<{ q: string; records: MarkRecord[]; next: string | null } | undefined>();
  const [error, setError] = useState('');
  const [loading, setLoading] = useState(false);

  const load = async (q: string, cursor?: string) => {
    setLoading(true);
    setError('');
    try {
      const params = new URLSearchParams({ limit: '50' });
      if (q) params.set('q', q);
      if (cursor) params.set('cursor', cursor);
      const page = await getJson<Page>(apiKey, `/api/v1/dashboard/records?${params}`);
      setShown((prev) => ({ q, records: cursor && prev ? [...prev.records, ...page.records] : page.records, next: page.next }));
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    void load('');
  }, []);

  const exportAs = (format: 'csv' | 'json') => {
    const params = new URLSearchParams({ format });
    if (shown?.q) params.set('q', shown.q);
    void getBlob(apiKey, `/api/v1/dashboard/records/export?${params}`).then(
      (blob) => saveBlob(blob, `optmark-records-${new Date().toISOString().slice(0, 10)}.${format}`),
      (err: unknown) => setError(err instanceof ApiError ? err.message : String(err)),
    );
  };

  return (
    <section aria-labelledby="history-title">
      <h2 id="history-title">History</h2>
      <p class="lead">
        A dated record of every image protected here: the SHA-256 of the file you downloaded, its original name, the layers, the time and the key used.
      </p>
      <form
        class="row search"
        onSubmit={(e) => {
          e.preventDefault();
          void load(query.trim());
        }}
      >
        <label for="history-q">Search by file name or SHA-256</label>
        <input id="history-q" type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} spellcheck={false} />
        <button type="submit">Search</button>
      </form>
      <div class="row">
        <button type="button" onClick={() => exportAs('csv')}>
          Export CSV
        </button>
        <button type="button" onClick={() => exportAs('json')}>
          Export JSON
        </button>
      </div>
      <p role="status" aria-live="polite" class="notice">
        {error ? (
          <span class="error">{error}</span>
        ) : loading ? (
          'Loading…'
        ) : shown ? (
          `${shown.records.length}${shown.next ? '+' : ''} record${shown.records.length === 1 ? '' : 's'}${shown.q ? ` matching "${shown.q}"` : ''}.`
        ) : (
          ''
        )}
      </p>
      {shown && (
        <ul class="records">
          {shown.records.map((r) => (
            <li key={r.id} class="record">
              <p class="name">{r.originalName}</p>
              <dl class="facts">
                <dt>Marked</dt>
                <dd>{formatDate(r.markedAt)}</dd>
                <dt>Produced</dt>
                <dd>
                  {r.producedName} ({r.mimeType}, {formatBytes(r.bytes)})
                </dd>
                <dt>Layers</dt>
                <dd>{r.layers.length ? r.layers.join(', ') : 'none (opt-out field only)'}</dd>
                <dt>Key</dt>
                <dd>{r.keyPrefix}…</dd>
                <dt>SHA-256</dt>
                <dd>
                  <code class="hash">{r.sha256}</code>
                </dd>
              </dl>
            </li>
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
