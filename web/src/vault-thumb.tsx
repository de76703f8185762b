/**
 * Thumbnails of vault objects. The bytes come from /content with the key in the Authorization header
 * (never in a URL), so each is fetched and shown from a blob: URL, revoked when the thumbnail goes away.
 * At most a few are fetched at once, only once they are near the screen, and only for files small enough
 * to be worth it.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { getBlob, getJson } from './api';
import { objectPath, type VaultPage } from './vault-types';

/** Files larger than this get a format badge instead of a thumbnail (the whole file would be fetched). */
const THUMB_MAX_BYTES = 8 * 1024 * 1024;
const LANES = 4;

let running = 0;
const waiting: Array<() => void> = [];

/** Runs `job` when one of the LANES is free. */
async function inLane<T>(job: () => Promise<T>): Promise<T> {
  if (running >= LANES) await new Promise<void>((go) => waiting.push(go));
  running++;
  try {
    return await job();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** Resolves once `el` is within a screen of the viewport. */
function nearScreen(el: Element, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const io = new IntersectionObserver(
      (entries) => {
        if (entries.some((e) => e.isIntersecting)) {
          io.disconnect();
          resolve();
        }
      },
      { rootMargin: '100% 0px' },
    );
    io.observe(el);
    signal.addEventListener('abort', () => io.disconnect());
  });
}

function badge(mimeType: string | null | undefined): string {
  const sub = (mimeType ?? '').split('/').pop() ?? '';
  return (sub || '?').toUpperCase();
}

/** The thumbnail of one vault object, or its format badge. */
export function VaultThumb({ apiKey, id, bytes, mimeType }: { apiKey: string; id: string; bytes: number; mimeType: string }) {
  const box = useRef<HTMLSpanElement>(null);
  const [url, setUrl] = useState<string | undefined>();
  const [failed, setFailed] = useState(false);
  const small = bytes <= THUMB_MAX_BYTES && /^image\/(jpeg|png|webp)$/.test(mimeType);

  useEffect(() => {
    if (!small || !box.current) return;
    const stop = new AbortController();
    let made: string | undefined;
    void nearScreen(box.current, stop.signal)
      .then(() => (stop.signal.aborted ? undefined : inLane(() => getBlob(apiKey, `${objectPath(id)}/content`))))
      .then(
        (blob) => {
          if (!blob || stop.signal.aborted) return;
          made = URL.createObjectURL(blob);
          setUrl(made);
        },
        () => setFailed(true),
      );
    return () => {
      stop.abort();
      if (made) URL.revokeObjectURL(made);
    };
  }, [id]);

  return (
    <span ref={box} class="thumb-box">
      {url ? (
        <img class="thumb" src={url} alt="" width={72} height={72} decoding="async" onError={() => setFailed(true)} />
      ) : (
        <span class={`format${failed ? ' failed' : ''}`} aria-hidden="true">
          {badge(mimeType)}
        </span>
      )}
    </span>
  );
}

/** The thumbnail of the vault's copy of a record's marked file (or its original), for a scan's "ours" rows. */
export function RecordThumb({ apiKey, record, fallback }: { apiKey: string; record: string; fallback: string | null }) {
  const [object, setObject] = useState<{ id: string; bytes: number; mimeType: string } | null | undefined>();
  useEffect(() => {
    let stopped = false;
    void getJson<VaultPage>(apiKey, `/api/v1/vault/objects?${new URLSearchParams({ record, limit: '2' })}`).then(
      (page) => {
        if (stopped) return;
        setObject(page.objects.find((o) => o.kind === 'marked') ?? page.objects[0] ?? null);
      },
      () => !stopped && setObject(null),
    );
    return () => {
      stopped = true;
    };
  }, [record]);
  if (object) return <VaultThumb apiKey={apiKey} id={object.id} bytes={object.bytes} mimeType={object.mimeType} />;
  return (
    <span class="format" aria-hidden="true">
      {(fallback ?? '?').toUpperCase()}
    </span>
  );
}
