import { useEffect, useState } from 'preact/hooks';
import { ApiError, getJson } from './api';
import type { VaultInfo } from './vault-types';

/**
 * The account's vault state, owned here for every tab (Protect's option, Vault, Settings, the scans'
 * thumbnails): undefined while loading, null where the server has no vault. `refresh(v)` takes a fresh
 * state when the caller has one (PUT's answer) or asks the server.
 */
export function useVault(apiKey: string): [VaultInfo | null | undefined, (v?: VaultInfo) => void] {
  const [vault, setVault] = useState<VaultInfo | null | undefined>();
  const refresh = (v?: VaultInfo) => {
    if (v) {
      setVault(v);
      return;
    }
    void getJson<VaultInfo>(apiKey, '/api/v1/vault').then(setVault, (err: unknown) => {
      // 404: a server without the vault. Anything else keeps what the page knew.
      if (err instanceof ApiError && err.status === 404) setVault(null);
      else setVault((prev) => prev ?? null);
    });
  };
  useEffect(() => refresh(), [apiKey]);
  return [vault, refresh];
}
