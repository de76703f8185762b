import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, getJson } from './api';
import { FILTERS, isOurs, type FilterId, type ResultsPage, type ScanCounts, type ScanItem } from './scan-types';
import { RecordThumb } from './vault-thumb';

/** Items asked for per page, and the most the page holds (a scan stops at 10,000 images by default). */
const PAGE = 500;
const MAX_ITEMS = 20_000;
/** Rows drawn at once; "Show more" draws the next ones. */
const ROWS = 100;

const SUMMARY: Array<[keyof ScanCounts, string, string]> = [
  ['images', 'Images', 'JPEG, PNG and WebP images found'],
  ['optedOut', 'Opted out', 'an opt-out embedded in the file'],
  ['servedOptOut', 'Served opt-out', 'an opt-out served beside it (headers, robots.txt, ai.txt, tdmrep.json, meta tags)'],
  ['noOptOut', 'No opt-out', 'neither embedded nor served'],
  ['ours', 'Ours', 'marked by this server (provenance or fingerprint)'],
  ['oursStripped', 'Ours, stripped', 'marked by this server, but no embedded opt-out left'],
  ['inVault', 'In your vault', 'looks like one of your vault originals, whatever its metadata'],
  ['failed', 'Failed', 'could not be read'],
];

/** The scan's counts, each with what it counts. */
export function ScanSummary({ counts }: { counts: ScanCounts }) {
  return (
    <dl class="summary" aria-label="Summary">
      {SUMMARY.map(([key, label, hint]) => (
        <div key={key} class={`count ${key}${key === 'oursStripped' && counts.oursStripped > 0 ? ' alert' : ''}`}>
          <dt>{label}</dt>
          <dd>
            <span class="value" data-count={key}>
              {(counts[key] ?? 0).toLocaleString()}
            </span>
            <span class="hint">{hint}</span>
          </dd>
        </div>
      ))}
    </dl>
  );
}

/** Every item of a finished scan, with a filter by category and by text, drawn a hundred rows at a time. */
export function ScanResults({ apiKey, id, vaultOn }: { apiKey: string; id: string; vaultOn: boolean }) {
  const [items, setItems] = useState<ScanItem[]>([]);
  const [loading, setLoading] = useState(true);
  const [truncated, setTruncated] = useState(false);
  const [error, setError] = useState('');
  const [filter, setFilter] = useState<FilterId>('all');
  const [text, setText] = useState('');
  const [rows, setRows] = useState(ROWS);

  useEffect(() => {
    let stopped = false;
    void (async () => {
      try {
        let cursor: string | null = null;
        const all: ScanItem[] = [];
        do {
          const params = new URLSearchParams({ limit: String(PAGE) });
          if (cursor) params.set('cursor', cursor);
          const page: ResultsPage = await getJson<ResultsPage>(apiKey, `/api/v1/scans/${encodeURIComponent(id)}/results?${params}`);
          if (stopped) return;
          all.push(...page.items);
          setItems([...all]);
          cursor = page.nextCursor ?? null;
        } while (cursor && all.length < MAX_ITEMS);
        setTruncated(cursor !== null);
      } catch (err) {
        if (!stopped) setError(err instanceof ApiError ? err.message : String(err));
      } finally {
        if (!stopped) setLoading(false);
      }
    })();
    return () => {
      stopped = true;
    };
  }, [id]);

  const needle = text.trim().toLowerCase();
  const shown = useMemo(
    () =>
      items.filter(
        (i) =>
          FILTERS[filter].test(i) &&
          (!needle || i.location.toLowerCase().includes(needle) || (i.sha256 ?? '').startsWith(needle) || i.servedSignals.some((s) => s.includes(needle))),
      ),
    [items, filter, needle],
  );

  return (
    <div class="scan-results">
      <h4>Images</h4>
      <form class="row filters" onSubmit={(e) => e.preventDefault()}>
        <div class="field">
          <label for="scan-filter">Show</label>
          <select
            id="scan-filter"
            value={filter}
            onChange={(e) => {
              setFilter(e.currentTarget.value as FilterId);
              setRows(ROWS);
            }}
          >
            {(Object.keys(FILTERS) as FilterId[]).map((f) => (
              <option key={f} value={f}>
                {FILTERS[f].label}
              </option>
            ))}
          </select>
        </div>
        <div class="field grow">
          <label for="scan-text">Location, SHA-256 or served signal contains</label>
          <input
            id="scan-text"
            type="search"
            value={text}
            spellcheck={false}
            onInput={(e) => {
              setText(e.currentTarget.value);
              setRows(ROWS);
            }}
          />
        </div>
      </form>
      <p role="status" aria-live="polite" class="notice">
        {error ? (
          <span class="error">{error}</span>
        ) : loading ? (
          `Loading the images… ${items.length.toLocaleString()} so far.`
        ) : (
          `${shown.length.toLocaleString()} of ${items.length.toLocaleString()} image${items.length === 1 ? '' : 's'} shown.${truncated ? ` Only the first ${MAX_ITEMS.toLocaleString()} are in the page; the downloads have them all.` : ''}`
        )}
      </p>
      {shown.length > 0 && (
        <table class="items">
          <caption class="sr-only">Images of the scan, {FILTERS[filter].label.toLowerCase()}</caption>
          <thead>
            <tr>
              <th scope="col">
                <span class="sr-only">Preview</span>
              </th>
              <th scope="col">Location</th>
              <th scope="col">Embedded</th>
              <th scope="col">Served</th>
              <th scope="col">This server</th>
            </tr>
          </thead>
          <tbody>
            {shown.slice(0, rows).map((item, n) => (
              <ItemRow key={`${item.location}#${n}`} item={item} apiKey={apiKey} vaultOn={vaultOn} />
            ))}
          </tbody>
        </table>
      )}
      {shown.length > rows && (
        <button type="button" onClick={() => setRows((r) => r + ROWS)}>
          Show {Math.min(ROWS, shown.length - rows)} more
        </button>
      )}
    </div>
  );
}

function ItemRow({ item, apiKey, vaultOn }: { item: ScanItem; apiKey: string; vaultOn: boolean }) {
  const ours = isOurs(item);
  const stripped = ours && !item.optedOut && !item.error;
  return (
    <tr class={item.error ? 'failed' : stripped ? 'stripped' : undefined}>
      <td class="preview">
        {vaultOn && item.record ? (
          <RecordThumb apiKey={apiKey} record={item.record.id} fallback={item.format} />
        ) : (
          <span class={`format ${item.format ?? 'unknown'}`} aria-hidden="true">
            {(item.format ?? '?').toUpperCase()}
          </span>
        )}
      </td>
      <td data-label="Location">
        <span class="location">{item.location}</span>
        {item.sha256 && <code class="hash short">{item.sha256.slice(0, 16)}…</code>}
        {item.error && (
          <span class="error">
            {' '}
            {item.error.message} ({item.error.code})
          </span>
        )}
      </td>
      <td data-label="Embedded">{item.error ? '—' : item.optedOut ? (item.signals.length ? item.signals.join(', ') : 'Opted out') : 'None'}</td>
      <td data-label="Served">{item.error ? '—' : item.servedSignals.length ? item.servedSignals.join(', ') : 'None'}</td>
      <td data-label="This server">
        {item.error ? '—' : ours ? (stripped ? 'Ours, opt-out stripped' : 'Ours') : 'Not ours'}
        {item.record && <span class="hint"> · record {item.record.id.slice(0, 8)}</span>}
        {item.vault?.[0] && (
          <span class="vault-match">
            {' '}
            · looks like your original <strong>{item.vault[0].name}</strong>
            <span class="hint"> (distance {item.vault[0].distance})</span>
          </span>
        )}
      </td>
    </tr>
  );
}
