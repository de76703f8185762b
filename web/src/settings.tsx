import { useState } from 'preact/hooks';
import { ApiError, putJson } from './api';
import { formatSize } from './util';
import type { VaultInfo } from './vault-types';

/** Account settings: the Private Vault on or off (off by default; turning it off keeps what is stored). */
export function SettingsView({ apiKey, vault, onVault }: { apiKey: string; vault: VaultInfo | null; onVault: (v?: VaultInfo) => void }) {
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState('');
  // The box shows what was asked for while the server answers (a controlled box would flip back meanwhile).
  const [asked, setAsked] = useState<boolean | undefined>();

  const toggle = async (enabled: boolean) => {
    setAsked(enabled);
    setBusy(true);
    setNotice('');
    try {
      const next = await putJson<VaultInfo>(apiKey, '/api/v1/vault', { enabled });
      onVault(next);
      setNotice(enabled ? 'The vault is on: images you mark here keep their originals.' : 'The vault is off. What it holds stays until you delete it.');
    } catch (err) {
      setNotice(`The setting was not changed: ${err instanceof ApiError ? err.message : String(err)}`);
    } finally {
      setAsked(undefined);
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <fieldset disabled={busy || vault === null}>
        <legend>Private Vault</legend>
        <div class="check">
          <input
            type="checkbox"
            id="vault-enabled"
            checked={asked ?? vault?.enabled ?? false}
            onChange={(e) => void toggle(e.currentTarget.checked)}
            aria-describedby="vault-enabled-help"
          />
          <label for="vault-enabled">Keep originals in a Private Vault</label>
        </div>
        <p id="vault-enabled-help" class="hint">
          {vault
            ? `Each image marked here keeps its original and its marked file, encrypted, for this account only: up to ${formatSize(vault.limitBytes)}. Off by default.`
            : 'This server has no vault.'}
        </p>
      </fieldset>
      <p role="status" aria-live="polite" class="notice">
        {notice}
      </p>
    </section>
  );
}
