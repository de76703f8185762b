/**
 * The operator side of the Store interface, once for both engines: each engine hands its account book
 * (sqlite/accounts.ts, postgres/accounts.ts: the dialect) and how it writes pending last-used times;
 * names and prefixes go through the store's text check (./text.ts) first.
 */
import { checkName } from './text.js';
import type { Account, KeyInfo, Plan, Usage } from './types.js';

type Awaitable<T> = T | Promise<T>;

/** What an engine's accounts module does (synchronously for SQLite). */
export interface AccountBook {
  bootstrapIfEmpty(): Awaitable<{ account: Account; key: string } | undefined>;
  createAccount(name: string, plan: Plan, now: Date): Awaitable<Account>;
  listAccounts(): Awaitable<Account[]>;
  getAccount(name: string): Awaitable<Account>;
  setPlan(name: string, plan: Plan): Awaitable<Account>;
  setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Awaitable<Account>;
  issueKey(accountName: string, now: Date): Awaitable<{ key: string; prefix: string; id: number }>;
  listKeys(accountName: string): Awaitable<KeyInfo[]>;
  revokeKey(prefix: string, now: Date): Awaitable<{ prefix: string; account: string; alreadyRevoked: boolean }>;
  usage(accountName: string, month: string | undefined, now: Date): Awaitable<Usage>;
}

export abstract class OperatorSide {
  protected abstract readonly book: AccountBook;
  /** Writes the last-used times noted so far (a key listing shows them). */
  protected abstract flushLastUsed(): Awaitable<void>;

  async bootstrapIfEmpty(): Promise<{ account: Account; key: string } | undefined> {
    return this.book.bootstrapIfEmpty();
  }

  async createAccount(name: string, plan: Plan, now: Date = new Date()): Promise<Account> {
    return this.book.createAccount(checkName('account', name), plan, now);
  }

  async listAccounts(): Promise<Account[]> {
    return this.book.listAccounts();
  }

  async getAccount(name: string): Promise<Account> {
    return this.book.getAccount(checkName('account', name));
  }

  async setPlan(name: string, plan: Plan): Promise<Account> {
    return this.book.setPlan(checkName('account', name), plan);
  }

  async setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Promise<Account> {
    return this.book.setLimits(checkName('account', name), limits);
  }

  async issueKey(accountName: string, now: Date = new Date()): Promise<{ key: string; prefix: string; id: number }> {
    return this.book.issueKey(checkName('account', accountName), now);
  }

  async listKeys(accountName: string): Promise<KeyInfo[]> {
    checkName('account', accountName);
    await this.flushLastUsed();
    return this.book.listKeys(accountName);
  }

  async revokeKey(prefix: string, now: Date = new Date()): Promise<{ prefix: string; account: string; alreadyRevoked: boolean }> {
    return this.book.revokeKey(checkName('key', prefix), now);
  }

  async usage(accountName: string, month?: string, now: Date = new Date()): Promise<Usage> {
    return this.book.usage(checkName('account', accountName), month, now);
  }
}
