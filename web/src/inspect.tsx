import { useState } from 'preact/hooks';
import { ApiError, postImage, type VerifyReport } from './api';
import { DropZone } from './dropzone';
import { FullReport } from './report';
import { sniff } from './util';

interface Inspection {
  id: number;
  name: string;
  report?: VerifyReport;
  error?: string;
}

let nextId = 1;

/** Drop any image to see everything verify reports about it (each image counts as one image check). */
export function InspectView({ apiKey, onUsage }: { apiKey: string; onUsage: () => void }) {
  const [list, setList] = useState<Inspection[]>([]);
  const [busy, setBusy] = useState(false);

  const inspect = async (files: File[]) => {
    setBusy(true);
    const fresh = files.map((f) => ({ id: nextId++, name: f.name }));
    setList((l) => [...fresh, ...l]);
    const set = (id: number, patch: Partial<Inspection>) => setList((l) => l.map((x) => (x.id === id ? { ...x, ...patch } : x)));
    try {
      for (const [i, file] of files.entries()) {
        const id = fresh[i]!.id;
        if (!(await sniff(file))) {
          set(id, { error: 'This file is not a JPEG, PNG or WebP image, so it was not sent.' });
          continue;
        }
        try {
          set(id, { report: await postImage<VerifyReport>(apiKey, '/api/v1/verify?vault=match', file) });
        } catch (err) {
          set(id, { error: err instanceof ApiError ? err.message : String(err) });
        }
      }
    } finally {
      setBusy(false);
      onUsage();
    }
  };

  return (
    <section aria-labelledby="inspect-title">
      <h2 id="inspect-title">Inspect images</h2>
      <p class="lead">
        See what verify finds in any image: the opt-out field, the provenance tag, the fingerprint, whether the dashboard marked these exact bytes, and which
        originals in your vault it looks like. Each image counts as one image check this month.
      </p>
      <DropZone id="inspect-files" label="Choose images to inspect" hint="Drop images here, or" disabled={busy} onFiles={(f) => void inspect(f)} />
      <p role="status" aria-live="polite" class="notice">
        {busy ? 'Checking…' : ''}
      </p>
      <ul class="files">
        {list.map((x) => (
          <li class="file" key={x.id}>
            <h3 class="name">{x.name}</h3>
            {x.error && <p class="error">{x.error}</p>}
            {x.report && <FullReport report={x.report} />}
            {!x.error && !x.report && <p>Checking…</p>}
          </li>
        ))}
      </ul>
    </section>
  );
}
