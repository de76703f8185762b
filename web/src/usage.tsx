import type { AccountInfo, Counter } from './api';
import { formatDay } from './util';

function Meter({ id, label, noun, c }: { id: string; label: string; noun: string; c: Counter }) {
  return (
    <div class="meter">
      <h3 id={id}>{label}</h3>
      <progress max={Math.max(1, c.limit)} value={Math.min(c.used, c.limit)} aria-labelledby={id} />
      <p>
        {c.used.toLocaleString()} of {c.limit.toLocaleString()} {noun} used; {c.remaining.toLocaleString()} left.
      </p>
    </div>
  );
}

/** The account's monthly counters and when they reset. */
export function UsageView({ info, onRefresh }: { info: AccountInfo; onRefresh: () => void }) {
  const u = info.usage;
  return (
    <section aria-labelledby="usage-title">
      <h2 id="usage-title">Usage this month ({u.month}, UTC)</h2>
      <Meter id="usage-protect" label="Protections" noun="protections" c={u.protect} />
      <Meter id="usage-verify" label="Image checks" noun="image checks" c={u.verify} />
      <p>
        Both counters reset on {formatDay(u.resetsAt)} at 00:00 UTC. Protections count the dashboard and the API together; image checks count verify calls and
        the Inspect tab.
      </p>
      <button type="button" onClick={onRefresh}>
        Refresh
      </button>
    </section>
  );
}
