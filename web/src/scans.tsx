import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, del, getFile, getJson, postJson } from './api';
import { ScanResults, ScanSummary } from './scan-results';
import { live, progressOf, STATE_TEXT, type Scan, type ScanList } from './scan-types';
import { formatDate, saveBlob } from './util';

/** How often a live scan is asked for again (ms). */
const POLL_MS = 1000;

function messageOf(err: unknown): string {
  return err instanceof ApiError ? err.message : String(err);
}

/** Repository scans: start one from a URL, watch it, read its summary and items, download them. */
export function ScansView({ apiKey, vaultOn }: { apiKey: string; vaultOn: boolean }) {
  const [scans, setScans] = useState<Scan[] | undefined>();
  const [selected, setSelected] = useState<string | undefined>();
  const [source, setSource] = useState('');
  const [followLinks, setFollowLinks] = useState(false);
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState(false);
  const [listError, setListError] = useState('');

  const loadList = async () => {
    try {
      const list = await getJson<ScanList>(apiKey, '/api/v1/scans');
      setScans(list.scans);
      setListError('');
    } catch (err) {
      setListError(`Your scans could not be listed: ${messageOf(err)}`);
    }
  };

  useEffect(() => {
    void loadList();
  }, []);

  const start = async (e: Event) => {
    e.preventDefault();
    const url = source.trim();
    if (!url) return;
    setBusy(true);
    setNotice('');
    try {
      const body: { source: string; options?: { followLinks: boolean } } = { source: url };
      if (followLinks) body.options = { followLinks: true };
      const scan = await postJson<Scan>(apiKey, '/api/v1/scans', body);
      setScans((list) => [scan, ...(list ?? []).filter((s) => s.id !== scan.id)]);
      setSelected(scan.id);
      setSource('');
    } catch (err) {
      setNotice(`The scan was not started: ${messageOf(err)}`);
    } finally {
      setBusy(false);
    }
  };

  // A scan's newest state, from its detail view's polling, goes into the list too.
  const changed = (scan: Scan) => setScans((list) => list?.map((s) => (s.id === scan.id ? scan : s)));

  return (
    <section aria-labelledby="scans-title">
      <h2 id="scans-title">Scans</h2>
      <p class="lead">
        Scan a web page, a URL list or dataset manifest (text, CSV, JSONL, Parquet), a .tar shard or a git repository: every JPEG, PNG and WebP found is checked
        as verify does, with the opt-out signals a crawler is served beside it. Scans count against a daily limit per account.
      </p>
      <form class="stack" onSubmit={(e) => void start(e)}>
        <label for="scan-source">Source URL</label>
        <input
          id="scan-source"
          type="url"
          inputMode="url"
          placeholder="https://example.com/gallery/"
          value={source}
          onInput={(e) => setSource(e.currentTarget.value)}
          spellcheck={false}
          required
          aria-describedby="scan-source-help"
        />
        <p id="scan-source-help" class="hint">
          https://, http:// or git:// (a git repository is cloned shallowly; nothing in it is run).
        </p>
        <div class="check">
          <input type="checkbox" id="scan-follow" checked={followLinks} onChange={(e) => setFollowLinks(e.currentTarget.checked)} />
          <label for="scan-follow">Follow links</label>
          <span class="hint">for a web page: also scan pages it links to on the same site, within the page and depth limits</span>
        </div>
        <div class="row">
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Starting…' : 'Start scan'}
          </button>
        </div>
      </form>
      <p role="status" aria-live="polite" class="notice">
        <span class="error">{notice}</span>
      </p>

      {selected && (
        <ScanDetail key={selected} apiKey={apiKey} id={selected} initial={scans?.find((s) => s.id === selected)} vaultOn={vaultOn} onChange={changed} />
      )}

      <h3>Your scans</h3>
      {listError ? (
        <p class="error">{listError}</p>
      ) : scans === undefined ? (
        <p>Loading…</p>
      ) : scans.length === 0 ? (
        <p>No scans yet.</p>
      ) : (
        <ul class="scans">
          {scans.map((s) => (
            <li key={s.id} class={s.id === selected ? 'scan current' : 'scan'}>
              <button type="button" class="link scan-open" aria-current={s.id === selected ? 'true' : undefined} onClick={() => setSelected(s.id)}>
                <span class="name">{s.source}</span>
              </button>
              <span class="hint">
                <span class={`badge state-${s.state}`}>{s.state}</span> {formatDate(s.createdAt)} · {s.counts.images.toLocaleString()} image
                {s.counts.images === 1 ? '' : 's'}
              </span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** One scan: polled while it is live; its summary, its items once it is over, cancel and downloads. */
function ScanDetail({
  apiKey,
  id,
  initial,
  vaultOn,
  onChange,
}: {
  apiKey: string;
  id: string;
  initial: Scan | undefined;
  vaultOn: boolean;
  onChange: (s: Scan) => void;
}) {
  const [scan, setScan] = useState<Scan | undefined>(initial);
  const [error, setError] = useState('');
  const onChangeRef = useRef(onChange);
  onChangeRef.current = onChange;

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        const s = await getJson<Scan>(apiKey, `/api/v1/scans/${encodeURIComponent(id)}`);
        if (stopped) return;
        setScan(s);
        setError('');
        onChangeRef.current(s);
        if (live(s.state)) timer = setTimeout(() => void poll(), POLL_MS);
      } catch (err) {
        if (stopped) return;
        setError(messageOf(err));
        // A lost connection is retried; a refusal (the scan is gone) is not.
        if (err instanceof ApiError && err.code === 'network') timer = setTimeout(() => void poll(), POLL_MS * 5);
      }
    };
    void poll();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }, [id]);

  const cancel = () => {
    if (!scan || !window.confirm(`Cancel the scan of ${scan.source}? The images checked so far stay in its results.`)) return;
    void del(apiKey, `/api/v1/scans/${encodeURIComponent(id)}`).then(
      () =>
        getJson<Scan>(apiKey, `/api/v1/scans/${encodeURIComponent(id)}`).then((s) => {
          setScan(s);
          onChangeRef.current(s);
        }),
      (err: unknown) => setError(messageOf(err)),
    );
  };

  const download = (format: 'csv' | 'jsonl') => {
    void getFile(apiKey, `/api/v1/scans/${encodeURIComponent(id)}/results?format=${format}`).then(
      ({ blob, name }) => saveBlob(blob, name ?? `optmark-scan-${id.slice(0, 8)}.${format}`),
      (err: unknown) => setError(messageOf(err)),
    );
  };

  if (!scan) {
    return (
      <div class="scan-detail">
        <p role="status" aria-live="polite">
          {error ? <span class="error">{error}</span> : 'Loading the scan…'}
        </p>
      </div>
    );
  }
  const isLive = live(scan.state);
  return (
    <section class="scan-detail" aria-labelledby="scan-detail-title">
      <h3 id="scan-detail-title">
        Scan of <span class="source">{scan.source}</span>
      </h3>
      <Progress scan={scan} />
      {error && <p class="error">{error}</p>}
      {scan.error && (
        <p class="error">
          The scan failed: {scan.error.message} ({scan.error.code})
        </p>
      )}
      <dl class="facts">
        <dt>Started</dt>
        <dd>{scan.startedAt ? formatDate(scan.startedAt) : 'not yet'}</dd>
        {scan.finishedAt && (
          <>
            <dt>Finished</dt>
            <dd>{formatDate(scan.finishedAt)}</dd>
          </>
        )}
      </dl>
      <ScanSummary counts={scan.counts} />
      <div class="row">
        {isLive && (
          <button type="button" onClick={cancel}>
            Cancel scan
          </button>
        )}
        <button type="button" onClick={() => download('csv')}>
          Download CSV
        </button>
        <button type="button" onClick={() => download('jsonl')}>
          Download JSONL
        </button>
      </div>
      {!isLive && <ScanResults apiKey={apiKey} id={scan.id} vaultOn={vaultOn} />}
    </section>
  );
}

/**
 * The bar shows every step; the live region speaks only the state and tenths of the way, so a screen
 * reader is not told a number every second.
 */
function Progress({ scan }: { scan: Scan }) {
  const { done, total } = progressOf(scan);
  const fraction = total ? Math.min(1, done / total) : undefined;
  const tenth = fraction === undefined ? undefined : Math.floor(fraction * 10) * 10;
  const spoken =
    scan.state === 'running'
      ? tenth === undefined
        ? `Running: ${Math.floor(done / 100) * 100 || done} images checked so far.`
        : `Running: about ${tenth}% done.`
      : `${STATE_TEXT[scan.state]}. ${done.toLocaleString()} image${done === 1 ? '' : 's'} checked.`;
  return (
    <div class="scan-progress">
      <progress
        max={total ?? 1}
        value={total ? Math.min(done, total) : scan.state === 'running' || scan.state === 'queued' || scan.state === 'paused' ? undefined : 1}
        aria-label="Scan progress"
      />
      <p>
        <span class={`badge state-${scan.state}`}>{STATE_TEXT[scan.state]}</span> {done.toLocaleString()}
        {total !== null ? ` of ${total.toLocaleString()}` : ''} image{(total ?? done) === 1 ? '' : 's'} checked
      </p>
      <p role="status" aria-live="polite" class="sr-only">
        {spoken}
      </p>
    </div>
  );
}
