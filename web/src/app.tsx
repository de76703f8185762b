import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, getJson, type AccountInfo } from './api';
import { HistoryView } from './history';
import { InspectView } from './inspect';
import { ProtectView } from './protect';
import { ScansView } from './scans';
import { SettingsView } from './settings';
import { UsageView } from './usage';
import { useVault } from './use-vault';
import { VaultView } from './vault';

/** The key lives in this tab's session storage only: gone when the tab closes, never in a URL or log. */
const KEY_SLOT = 'optmark.apiKey';

const TABS = [
  ['protect', 'Protect'],
  ['inspect', 'Inspect'],
  ['history', 'History'],
  ['scans', 'Scans'],
  ['vault', 'Vault'],
  ['usage', 'Usage'],
  ['settings', 'Settings'],
] as const;
type Tab = (typeof TABS)[number][0];

/** A plain-language sentence for a refused sign-in. */
function signInMessage(err: unknown): string {
  if (!(err instanceof ApiError)) return String(err);
  switch (err.code) {
    case 'missing_api_key':
      return 'Enter your API key to sign in.';
    case 'invalid_api_key':
      return /revoked/i.test(err.message)
        ? 'This API key has been revoked, so it no longer works. Ask your optmark operator for a new key.'
        : 'This API key is not recognised. Check that you pasted all of it (it starts with om_live_) and try again.';
    case 'plan_required':
      return 'This key belongs to an account on the free plan. The dashboard, like the API, is part of the Pro and Lifetime plans; ask your operator to upgrade the account.';
    case 'network':
      return err.message;
    default:
      return `Signing in failed: ${err.message}`;
  }
}

function readKey(): string {
  try {
    return sessionStorage.getItem(KEY_SLOT) ?? '';
  } catch {
    return '';
  }
}

export function App() {
  const [key, setKey] = useState<string>(readKey);
  const [info, setInfo] = useState<AccountInfo | undefined>();
  const [checking, setChecking] = useState<boolean>(() => readKey() !== '');
  const [message, setMessage] = useState('');
  const [tab, setTab] = useState<Tab>('protect');

  const signIn = async (candidate: string) => {
    setChecking(true);
    setMessage('');
    try {
      const account = await getJson<AccountInfo>(candidate, '/api/v1/dashboard/account');
      try {
        sessionStorage.setItem(KEY_SLOT, candidate);
      } catch {
        /* private mode without storage: the key lives in memory only */
      }
      setKey(candidate);
      setInfo(account);
    } catch (err) {
      sessionStorage.removeItem(KEY_SLOT);
      setKey('');
      setInfo(undefined);
      setMessage(signInMessage(err));
    } finally {
      setChecking(false);
    }
  };

  const refresh = () => {
    if (key) void getJson<AccountInfo>(key, '/api/v1/dashboard/account').then(setInfo, () => {});
  };

  const signOut = () => {
    sessionStorage.removeItem(KEY_SLOT);
    setKey('');
    setInfo(undefined);
    setMessage('Signed out. The key was removed from this tab.');
  };

  useEffect(() => {
    const stored = readKey();
    if (stored) void signIn(stored);
  }, []);

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <h1>optmark</h1>
        {info && (
          <div class="who">
            <span>
              {info.account.name} · {info.account.plan} · key {info.key.prefix}…
            </span>
            <button type="button" onClick={signOut}>
              Sign out
            </button>
          </div>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {info ? (
          <Signed info={info} apiKey={key} tab={tab} setTab={setTab} refresh={refresh} />
        ) : (
          <SignIn busy={checking} message={message} onSubmit={(k) => void signIn(k)} />
        )}
      </main>
      <footer class="foot">
        <p>The opt-out field records a rights reservation; it does not guarantee that AI systems comply.</p>
      </footer>
    </>
  );
}

function SignIn({ busy, message, onSubmit }: { busy: boolean; message: string; onSubmit: (key: string) => void }) {
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  return (
    <section class="signin" aria-labelledby="signin-title">
      <h2 id="signin-title">Sign in</h2>
      <p>Mark images with the IPTC/PLUS AI-training opt-out, add a signed provenance tag and an in-pixel fingerprint, and keep a dated record of it.</p>
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          const value = input.current?.value.trim() ?? '';
          if (value) onSubmit(value);
        }}
      >
        <label for="api-key">API key</label>
        <input ref={input} id="api-key" name="api-key" type="password" autocomplete="off" spellcheck={false} required aria-describedby="signin-help" />
        <p id="signin-help" class="hint">
          The key your operator gave you (om_live_…). It stays in this browser tab only.
        </p>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p role="alert" class="error">
        {message}
      </p>
    </section>
  );
}

function Signed({ info, apiKey, tab, setTab, refresh }: { info: AccountInfo; apiKey: string; tab: Tab; setTab: (t: Tab) => void; refresh: () => void }) {
  const [vault, refreshVault] = useVault(apiKey);
  const tabs = useRef<Array<HTMLButtonElement | null>>([]);
  const onKey = (e: KeyboardEvent, i: number) => {
    const last = TABS.length - 1;
    const to =
      e.key === 'ArrowRight' ? (i === last ? 0 : i + 1) : e.key === 'ArrowLeft' ? (i === 0 ? last : i - 1) : e.key === 'Home' ? 0 : e.key === 'End' ? last : -1;
    if (to < 0) return;
    e.preventDefault();
    setTab(TABS[to]![0]);
    tabs.current[to]?.focus();
  };
  return (
    <>
      <div role="tablist" aria-label="Dashboard sections" class="tabs">
        {TABS.map(([id, label], i) => (
          <button
            key={id}
            ref={(el) => {
              tabs.current[i] = el;
            }}
            type="button"
            role="tab"
            id={`tab-${id}`}
            aria-selected={tab === id}
            aria-controls={`panel-${id}`}
            tabIndex={tab === id ? 0 : -1}
            onClick={() => setTab(id)}
            onKeyDown={(e) => onKey(e, i)}
          >
            {label}
          </button>
        ))}
      </div>
      {TABS.map(([id]) => (
        <div key={id} role="tabpanel" id={`panel-${id}`} aria-labelledby={`tab-${id}`} hidden={tab !== id} class="panel">
          {id === 'protect' && (
            <ProtectView
              apiKey={apiKey}
              info={info}
              vaultOn={vault?.enabled === true}
              onUsage={() => {
                refresh();
                refreshVault();
              }}
            />
          )}
          {id === 'inspect' && tab === id && <InspectView apiKey={apiKey} onUsage={refresh} />}
          {id === 'history' && tab === id && <HistoryView apiKey={apiKey} />}
          {id === 'scans' && tab === id && <ScansView apiKey={apiKey} vaultOn={vault?.enabled === true || (vault?.objects ?? 0) > 0} />}
          {id === 'vault' &&
            tab === id &&
            (vault ? <VaultView apiKey={apiKey} vault={vault} onVault={refreshVault} /> : <p>{vault === null ? 'This server has no vault.' : 'Loading…'}</p>)}
          {id === 'usage' && tab === id && <UsageView info={info} onRefresh={refresh} />}
          {id === 'settings' && tab === id && <SettingsView apiKey={apiKey} vault={vault ?? null} onVault={refreshVault} />}
        </div>
      ))}
    </>
  );
}
