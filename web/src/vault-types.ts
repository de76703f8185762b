/** The vault API as the page reads it (docs/vault.md; GET /api/v1/vault and /api/v1/vault/objects). */

export interface VaultInfo {
  enabled: boolean;
  usedBytes: number;
  limitBytes: number;
  objects: number;
}

export interface VaultObject {
  id: string;
  name: string;
  sha256: string;
  bytes: number;
  mimeType: string;
  createdAt: string;
  kind: 'original' | 'marked';
  /** The dashboard record it belongs to (an original and its marked file share one), or null. */
  record: string | null;
}

export interface VaultPage {
  objects: VaultObject[];
  next: string | null;
}

export const objectPath = (id: string) => `/api/v1/vault/objects/${encodeURIComponent(id)}`;
