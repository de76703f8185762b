// The deployment files (Dockerfile, .dockerignore, compose.yaml with deploy/nginx.conf, the systemd unit and
// the example environment file), parsed and checked against the code they deploy: the configuration's
// variables and parsers, the CLI's entry point, and the health endpoints of a real running server (their
// health-check commands are run against it). No Docker engine or systemd runs here.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfig, MULTIPART_SLACK_BYTES, SETTINGS } from '../src/config.js';
import { freePort, ROOT, TestServer } from './helpers/server.js';

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

/** One real server whose health endpoints the files' health-check commands are run against. */
let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => {
  await server?.dispose();
});

// ---- what the deployed code knows

/** Every variable of the configuration table (SETTINGS in src/config.ts). */
function configVariables(): Set<string> {
  return new Set(SETTINGS.map((s) => s.variable));
}

/** The source file a dist/... JavaScript path is built from (tsc keeps the layout). */
function sourceOf(distPath: string): string {
  const m = /(?:^|\/)dist\/(.+)\.js$/.exec(distPath);
  if (!m) throw new Error(`not a path under dist/: ${distPath}`);
  return `${m[1]}.ts`;
}

/** Runs a health-check command (an exec-form argv whose program is node) and resolves to its exit status. */
function runCheck(argv: string[], env: Record<string, string> = {}): Promise<number | null> {
  expect(argv[0]).toBe('node');
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, argv.slice(1), { env: { ...process.env, ...env }, stdio: 'ignore', timeout: 20_000 });
    child.on('error', fail).on('exit', (code) => done(code));
  });
}

// ---- Dockerfile

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Dockerfile instructions with line continuations joined and comment lines dropped (as BuildKit reads them). */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let current: Instruction | undefined;
  text.split('\n').forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#') || (trimmed === '' && current === undefined)) return;
    const continues = trimmed.endsWith('\\');
    const body = continues ? trimmed.slice(0, -1).trim() : trimmed;
    if (current === undefined) {
      const m = /^([A-Za-z]+)\s*(.*)$/.exec(body);
      if (!m) throw new Error(`Dockerfile line ${i + 1}: not an instruction: ${raw}`);
      current = { keyword: m[1]!.toUpperCase(), args: m[2]!, line: i + 1 };
    } else if (body !== '') {
      current.args += ` ${body}`;
    }
    if (!continues) {
      out.push(current);
      current = undefined;
    }
  });
  if (current) throw new Error('Dockerfile ends inside a continued line');
  return out;
}

interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

function stagesOf(instructions: Instruction[]): Stage[] {
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      if (!m) throw new Error(`FROM at line ${ins.line}: ${ins.args}`);
      const image = m[1]!.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string | undefined, b: string | undefined) => {
        const value = globalArgs.get((a ?? b)!);
        if (value === undefined) throw new Error(`FROM at line ${ins.line} uses ${a ?? b}, which has no default`);
        return value;
      });
      stages.push({ image, name: m[2], instructions: [] });
    } else if (stages.length === 0) {
      if (ins.keyword !== 'ARG') throw new Error(`${ins.keyword} before the first FROM (line ${ins.line})`);
      const [name, value] = ins.args.split('=', 2);
      if (value !== undefined) globalArgs.set(name!.trim(), value.trim());
    } else {
      stages.at(-1)!.instructions.push(ins);
    }
  }
  return stages;
}

const execForm = (args: string): string[] => {
  const parsed: unknown = JSON.parse(args);
  expect(Array.isArray(parsed) && parsed.every((s) => typeof s === 'string')).toBe(true);
  return parsed as string[];
};

/** ENV instructions of a stage as a map (the `KEY=value KEY2=value2` form). */
function envOf(stage: Stage): Map<string, string> {
  const env = new Map<string, string>();
  for (const ins of stage.instructions.filter((i) => i.keyword === 'ENV')) {
    for (const m of ins.args.matchAll(/([A-Z_][A-Z0-9_]*)=("[^"]*"|\S+)/g)) env.set(m[1]!, m[2]!.replace(/^"|"$/g, ''));
  }
  return env;
}

describe('Dockerfile', () => {
  const stages = stagesOf(parseDockerfile(read('Dockerfile')));
  const build = stages.find((s) => s.instructions.some((i) => i.keyword === 'RUN' && /\bnpm ci\b/.test(i.args)));
  const final = stages.at(-1)!;
  const runs = (s: Stage | undefined): string =>
    (s?.instructions ?? [])
      .filter((i) => i.keyword === 'RUN')
      .map((i) => i.args)
      .join('\n');

  it('is multi-stage, every stage on Debian bookworm with Node.js 20 (the uWebSockets.js binary needs its glibc)', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const s of stages) expect(s.image).toMatch(/^node:20[.\d]*-bookworm(-slim)?$/);
  });

  it('builds in its own stage: the C++ toolchain, npm ci, the TypeScript build, dev dependencies pruned', () => {
    expect(build).toBeDefined();
    expect(build).not.toBe(final);
    expect(build!.name).toBeDefined();
    expect(runs(build)).toMatch(/apt-get install[^\n]*\bpython3\b[^\n]*\bmake\b[^\n]*\bg\+\+/);
    expect(runs(build)).toMatch(/npm run build/);
    expect(runs(build)).toMatch(/npm prune --omit=dev/);
    // The final stage takes the built files from the build stage and installs no compiler.
    const copies = final.instructions.filter((i) => i.keyword === 'COPY');
    expect(copies.some((c) => c.args.includes(`--from=${build!.name}`) && /node_modules/.test(c.args))).toBe(true);
    expect(copies.some((c) => c.args.includes(`--from=${build!.name}`) && /\bdist\b/.test(c.args))).toBe(true);
    expect(runs(final)).not.toMatch(/\bg\+\+|\bmake\b/);
  });

  it('builds the scaled JPEG decode against libjpeg and ships the library it loads (else verify decodes with sharp alone)', () => {
    expect(runs(build)).toMatch(/apt-get install[^\n]*\blibjpeg62-turbo-dev\b/);
    expect(runs(build)).toMatch(/ls native\/build\/Release\/optmark_jpeg\.node/);
    expect(runs(final)).toMatch(/apt-get install[^\n]*\blibjpeg62-turbo\b/);
    expect(final.instructions.some((i) => i.keyword === 'COPY' && /native\/build\/Release\/\*\.node/.test(i.args))).toBe(true);
  });

  it('runs as an unprivileged user', () => {
    const users = final.instructions.filter((i) => i.keyword === 'USER');
    expect(users.length).toBeGreaterThan(0);
    const user = users.at(-1)!.args.split(':')[0]!;
    expect(['root', '0', '']).not.toContain(user);
  });

  it('puts tini in front as PID 1 and starts the CLI that src/cli.ts builds, serve by default', () => {
    const entry = execForm(final.instructions.findLast((i) => i.keyword === 'ENTRYPOINT')!.args);
    expect(entry[0]).toMatch(/(^|\/)tini$/);
    expect(entry[1]).toBe('--');
    expect(runs(final)).toMatch(/apt-get install[^\n]*\btini\b/);
    expect(entry[2]).toBe('node');
    expect(existsSync(join(ROOT, sourceOf(entry[3]!)))).toBe(true);
    expect(execForm(final.instructions.findLast((i) => i.keyword === 'CMD')!.args)).toEqual(['serve']);
  });

  it('declares the data directory as a volume, owned by its user', () => {
    const env = envOf(final);
    const dataDir = env.get('OPTMARK_DATA_DIR');
    expect(dataDir).toMatch(/^\//);
    const volumes = final.instructions.filter((i) => i.keyword === 'VOLUME').flatMap((i) => (i.args.startsWith('[') ? execForm(i.args) : i.args.split(/\s+/)));
    expect(volumes).toContain(dataDir);
    expect(runs(final)).toContain(dataDir!);
    for (const name of env.keys()) if (name.startsWith('OPTMARK_')) expect(configVariables(), name).toContain(name);
    expect(() => loadConfig(Object.fromEntries(env))).not.toThrow();
    const port = loadConfig(Object.fromEntries(env)).port;
    expect(final.instructions.some((i) => i.keyword === 'EXPOSE' && i.args.split(/\s+/).includes(String(port)))).toBe(true);
  });

  describe('HEALTHCHECK against a real server', () => {
    const health = final.instructions.filter((i) => i.keyword === 'HEALTHCHECK');

    it('asks /healthz on OPTMARK_PORT: 0 while the server answers, 1 when nothing listens', async () => {
      expect(health).toHaveLength(1);
      const m = /^((?:--[a-z-]+=\S+\s+)*)CMD\s+(\[.*\])$/.exec(health[0]!.args);
      expect(m).not.toBeNull();
      expect(m![1]).toMatch(/--start-period=\S+/);
      const argv = execForm(m![2]!);
      expect(argv.join(' ')).toContain('/healthz');
      const closed = String(await freePort());
      const [up, down] = await Promise.all([runCheck(argv, { OPTMARK_PORT: String(server.port) }), runCheck(argv, { OPTMARK_PORT: closed })]);
      expect(up).toBe(0);
      expect(down).toBe(1);
    });
  });
});

describe('.dockerignore', () => {
  const ignored = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));

  it('keeps host builds, data and secrets out of the build context', () => {
    for (const path of ['node_modules', 'dist', 'native/build', 'data', '.git']) expect(ignored).toContain(path);
  });

  it('keeps every source the build stage compiles', () => {
    const tsconfig = JSON.parse(read('tsconfig.json')) as { include: string[] };
    const roots = [...new Set(tsconfig.include.map((p) => p.split('/')[0]!))];
    for (const path of [...roots, 'native', 'package.json', 'package-lock.json', 'tsconfig.json', 'bin', 'docs']) {
      expect(ignored.some((pattern) => pattern === path || pattern === `${path}/`)).toBe(false);
    }
  });
});

// ---- compose.yaml and the nginx in front

interface ComposeService {
  image?: string;
  build?: string | { context: string };
  environment?: Record<string, string | number | boolean | null>;
  volumes?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] | string };
}

describe('compose.yaml', () => {
  const compose = parseYaml(read('compose.yaml'), { merge: true }) as { services: Record<string, ComposeService>; volumes?: Record<string, unknown> };
  const services = compose.services;
  const optmarks = Object.entries(services).filter(([, s]) => s.build === '.' || (typeof s.build === 'object' && s.build.context === '.'));
  const envOfService = (s: ComposeService): Record<string, string> => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v)]));

  it('has PostgreSQL 15 with a named volume and a readiness check', () => {
    const pg = services.postgres!;
    expect(pg.image).toMatch(/^postgres:15(\.|-|$)/);
    expect(pg.volumes?.some((v) => v.endsWith(':/var/lib/postgresql/data'))).toBe(true);
    expect(JSON.stringify(pg.healthcheck?.test)).toContain('pg_isready');
  });

  it('runs two optmark instances from this Dockerfile on that database, once it is healthy', () => {
    expect(optmarks.length).toBe(2);
    const pg = envOfService(services.postgres!);
    for (const [name, s] of optmarks) {
      const env = envOfService(s);
      for (const variable of Object.keys(env)) expect(configVariables(), `${name}: ${variable}`).toContain(variable);
      const url = new URL(env.OPTMARK_DATABASE_URL!.replace(/\$\{[^}]*\}/, 'password'));
      expect(url.protocol).toBe('postgres:');
      expect(url.hostname).toBe('postgres');
      expect(url.username).toBe(pg.POSTGRES_USER);
      expect(url.pathname).toBe(`/${pg.POSTGRES_DB}`);
      expect(env.OPTMARK_DATABASE_URL).toContain(pg.POSTGRES_PASSWORD);
      expect(s.depends_on?.postgres?.condition).toBe('service_healthy');
      expect(() => loadConfig(env)).not.toThrow();
      expect(s.volumes?.some((v) => v.endsWith(`:${env.OPTMARK_DATA_DIR}`))).toBe(true);
    }
  });

  it('declares every named volume it mounts', () => {
    for (const s of Object.values(services)) {
      for (const v of s.volumes ?? []) {
        const source = v.split(':')[0]!;
        if (source.startsWith('.') || source.startsWith('/')) expect(existsSync(join(ROOT, source)), source).toBe(true);
        else expect(Object.keys(compose.volumes ?? {})).toContain(source);
      }
    }
  });

  it('puts nginx in front of exactly those instances, on their port, with room for the largest upload', () => {
    const nginx = Object.values(services).find((s) => s.image?.startsWith('nginx'))!;
    expect(nginx.ports?.length).toBeGreaterThan(0);
    for (const [name] of optmarks) expect(nginx.depends_on?.[name]?.condition).toBe('service_healthy');
    const mount = nginx.volumes!.find((v) => v.includes('/etc/nginx/'))!;
    const conf = read(mount.split(':')[0]!);
    const upstream = /upstream\s+\w+\s*\{([^}]*)\}/.exec(conf)![1]!;
    const servers = [...upstream.matchAll(/^\s*server\s+([\w.-]+):(\d+)/gm)].map((m) => `${m[1]}:${m[2]}`);
    const expected = optmarks.map(([name, s]) => `${name}:${loadConfig(envOfService(s)).port}`);
    expect(servers.sort()).toEqual(expected.sort());
    const size = /client_max_body_size\s+(\d+)([km]?);/i.exec(conf)!;
    const bytes = Number(size[1]) * ({ k: 1024, m: 1024 ** 2 } as Record<string, number>)[size[2]!.toLowerCase()]!;
    expect(bytes).toBeGreaterThanOrEqual(loadConfig({}).maxUploadBytes + MULTIPART_SLACK_BYTES);
  });

  describe('health checks against a real server', () => {
    it("an instance's check passes on a ready server and fails when nothing listens", async () => {
      const closed = String(await freePort());
      const checks = new Map<string, string[][]>();
      for (const [name, s] of optmarks) {
        const test = s.healthcheck!.test as string[];
        expect(test[0], name).toBe('CMD');
        const port = String(loadConfig(envOfService(s)).port);
        expect(test.join(' '), name).toContain(`:${port}/`);
        const at = (p: string) => test.slice(1).map((arg) => arg.replaceAll(`:${port}/`, `:${p}/`));
        checks.set(JSON.stringify(test), [at(String(server.port)), at(closed)]);
      }
      for (const [up, down] of checks.values()) {
        expect(await Promise.all([runCheck(up!), runCheck(down!)])).toEqual([0, 1]);
      }
    });
  });
});

// ---- systemd unit

/** A unit file as systemd reads it: sections of keys, a key listed again adds a value. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) return;
    const section = /^\[([A-Za-z]+)\]$/.exec(line);
    if (section) {
      current = new Map();
      sections.set(section[1]!, current);
      return;
    }
    const kv = /^([A-Za-z][A-Za-z0-9]*)=(.*)$/.exec(line);
    if (!kv || !current) throw new Error(`unit line ${i + 1}: ${raw}`);
    current.set(kv[1]!, [...(current.get(kv[1]!) ?? []), kv[2]!]);
  });
  return sections;
}

describe('deploy/optmark.service', () => {
  const unit = parseUnit(read('deploy/optmark.service'));
  const service = unit.get('Service')!;
  const one = (key: string): string | undefined => service.get(key)?.at(-1);
  const env = Object.fromEntries((service.get('Environment') ?? []).map((e) => e.split('=', 2) as [string, string]));

  it('has Unit, Service and Install sections and starts at boot', () => {
    expect([...unit.keys()]).toEqual(['Unit', 'Service', 'Install']);
    expect(unit.get('Unit')!.get('Description')?.[0]).toBeTruthy();
    expect(unit.get('Unit')!.get('After')?.join(' ')).toContain('network-online.target');
    expect(unit.get('Install')!.get('WantedBy')).toEqual(['multi-user.target']);
  });

  it('runs `serve` of the CLI that src/cli.ts builds, with an absolute node', () => {
    const argv = one('ExecStart')!.split(/\s+/);
    expect(argv[0]).toMatch(/^\/.*\/node$/);
    expect(existsSync(join(ROOT, sourceOf(argv[1]!)))).toBe(true);
    expect(argv.slice(2)).toEqual(['serve']);
  });

  it('keeps its data in its own state directory, as an unprivileged user', () => {
    expect(one('DynamicUser') === 'yes' || !['root', '0', undefined].includes(one('User'))).toBe(true);
    expect(one('StateDirectory')).toBe('optmark');
    expect(one('StateDirectoryMode')).toBe('0700');
    expect(env.OPTMARK_DATA_DIR).toBe(`/var/lib/${one('StateDirectory')}`);
    expect(one('EnvironmentFile')).toMatch(/^-?\/etc\/optmark\//);
    for (const name of Object.keys(env)) if (name.startsWith('OPTMARK_')) expect(configVariables()).toContain(name);
  });

  it('is hardened (and leaves V8 its executable memory)', () => {
    const hardening: Record<string, string> = {
      NoNewPrivileges: 'yes',
      ProtectSystem: 'strict',
      ProtectHome: 'yes',
      PrivateTmp: 'yes',
      PrivateDevices: 'yes',
      ProtectKernelTunables: 'yes',
      ProtectKernelModules: 'yes',
      ProtectControlGroups: 'yes',
      RestrictSUIDSGID: 'yes',
      LockPersonality: 'yes',
      SystemCallArchitectures: 'native',
    };
    for (const [key, value] of Object.entries(hardening)) expect(one(key), key).toBe(value);
    expect(one('CapabilityBoundingSet')).toBe('');
    expect(service.get('SystemCallFilter')).toContain('@system-service');
    expect(one('RestrictAddressFamilies')!.split(/\s+/).sort()).toEqual(['AF_INET', 'AF_INET6', 'AF_UNIX']);
    expect(one('MemoryDenyWriteExecute')).not.toBe('yes');
  });

  it('gives a graceful shutdown more time than the server takes to drain', () => {
    expect(one('KillSignal') ?? 'SIGTERM').toBe('SIGTERM');
    const stop = /^(\d+)s$/.exec(one('TimeoutStopSec')!)!;
    expect(Number(stop[1]) * 1000).toBeGreaterThan(loadConfig({}).shutdownTimeoutMs);
    expect(one('Restart')).toBe('on-failure');
  });
});

// ---- the example environment file

describe('deploy/optmark.env.example', () => {
  const text = read('deploy/optmark.env.example');
  const settings = text.split('\n').flatMap((line) => {
    const m = /^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    return m ? [{ name: m[2]!, value: m[3]!, active: m[1] === undefined }] : [];
  });

  it('names only variables the configuration knows, each once', () => {
    expect(settings.length).toBeGreaterThan(0);
    for (const s of settings) expect(configVariables(), s.name).toContain(s.name);
    expect(new Set(settings.map((s) => s.name)).size).toBe(settings.length);
  });

  it('lists every setting of the configuration', () => {
    const listed = new Set(settings.map((s) => s.name));
    for (const name of configVariables()) expect(listed, name).toContain(name);
  });

  it('gives values the configuration accepts, together and each one uncommented', () => {
    const active = Object.fromEntries(settings.filter((s) => s.active).map((s) => [s.name, s.value]));
    expect(() => loadConfig(active)).not.toThrow();
    // The C2PA certificate and key are set together (one alone is a configuration error): uncommented as a pair.
    const pair = ['OPTMARK_C2PA_CERT_FILE', 'OPTMARK_C2PA_KEY_FILE'];
    const withPartner = (name: string) => (pair.includes(name) ? pair : [name]);
    const exampleValue = (name: string) => settings.find((s) => s.name === name)!.value;
    for (const s of settings) {
      const uncommented = Object.fromEntries(withPartner(s.name).map((n) => [n, exampleValue(n)]));
      expect(() => loadConfig({ ...active, ...uncommented }), `${s.name}=${s.value}`).not.toThrow();
    }
    expect(() => loadConfig({ ...active, [pair[0]!]: exampleValue(pair[0]!) })).toThrow(/set both or neither/);
    // A value that is not plain: systemd and docker --env-file both take the rest of the line literally.
    for (const s of settings) expect(s.value, s.name).not.toMatch(/^["']|\s#/);
  });
});
