/**
 * The fetcher's keep-alive connections (./fetcher.ts). One http(s) Agent per origin and checked address:
 * a pooled socket is only ever handed to a request for the same origin whose name resolved, and was
 * checked, to the address that socket connected to (the fetcher checked its peer when it connected). A
 * request whose name now resolves elsewhere gets another agent, so never a socket connected under an
 * older answer.
 *
 * Each agent opens at most `perHostConcurrency` sockets, keeps at most that many idle, and drops an idle
 * one after IDLE_MS (before the usual 5 s keep-alive timeout of servers, so a reused socket is seldom
 * one the server is closing). An agent left with no socket is destroyed and forgotten, so a scan over
 * many hosts holds agents only for the hosts it is talking to. close() destroys them all.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';

const IDLE_MS = 4000;

export class AgentPool {
  readonly #agents = new Map<string, http.Agent>();
  readonly #maxSockets: number;

  constructor(maxSockets: number) {
    this.#maxSockets = Math.max(1, maxSockets);
  }

  /** The agent for `url`'s origin reached at `address` (already checked by the address policy). */
  agent(url: URL, address: string): http.Agent {
    const key = `${url.protocol}//${url.host} ${address}`;
    let agent = this.#agents.get(key);
    if (agent) return agent;
    const options: http.AgentOptions = {
      keepAlive: true,
      maxSockets: this.#maxSockets,
      maxFreeSockets: this.#maxSockets,
      timeout: IDLE_MS,
      scheduling: 'lifo',
    };
    const made = url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
    const create = made.createConnection.bind(made) as (o: unknown, cb: unknown) => Duplex | undefined;
    (made as unknown as { createConnection: typeof create }).createConnection = (o, cb) => {
      const socket = create(o, cb);
      // After the agent's own close listener has taken the socket out of its lists.
      socket?.once('close', () => setImmediate(() => this.#dropIfIdle(key, made)));
      return socket;
    };
    agent = made;
    this.#agents.set(key, agent);
    return agent;
  }

  /** Destroys every agent and its sockets, idle or not. */
  close(): void {
    for (const a of this.#agents.values()) a.destroy();
    this.#agents.clear();
  }

  #dropIfIdle(key: string, agent: http.Agent): void {
    const none = (lists: NodeJS.ReadOnlyDict<unknown[]>): boolean => Object.values(lists).every((l) => l === undefined || l.length === 0);
    if (this.#agents.get(key) !== agent || !none(agent.sockets) || !none(agent.freeSockets) || !none(agent.requests)) return;
    agent.destroy();
    this.#agents.delete(key);
  }
}
