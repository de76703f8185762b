// The system programs the test suites drive, checked before anything else runs (`npm test` runs this as its
// pretest script, `npm run test:long` as pretest:long with --long). The suites use the real parts (Debian's
// Chromium, PostgreSQL, HAProxy, nginx, ExifTool's Perl, curl) and never download a browser, so a fresh machine needs a
// few Debian packages: as root with apt-get they are installed here; otherwise this stops at once, naming
// them, rather than letting a suite fail minutes later. npm packages cover the rest (PDFs are read with
// PDF.js). PostgreSQL is needed only as binaries when no server answers: test/setup/postgres.ts then starts
// a private cluster for the run.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, readdirSync } from 'node:fs';
import { connect } from 'node:net';

const long = process.argv.includes('--long');

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
const onPath = (name) => spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
const postgresBinaries = () => {
  try {
    return readdirSync('/usr/lib/postgresql').some((v) => executable(`/usr/lib/postgresql/${v}/bin/initdb`));
  } catch {
    return false;
  }
};

/** Whether something accepts TCP connections where the tests' PostgreSQL URL points. */
function postgresAnswers() {
  const url = new URL(process.env.OPTMARK_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname || '127.0.0.1', port: Number(url.port || 5432), timeout: 2000 });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/** [Debian package, what needs it, whether it is here, required]: an optional one is installed as root, else named. */
const needs = [
  ['chromium', 'the browser tests (playwright-core drives /usr/bin/chromium)', () => executable(process.env.OPTMARK_CHROMIUM ?? '/usr/bin/chromium'), true],
  ['perl', 'ExifTool, the tests’ metadata oracle (exiftool-vendored)', () => onPath('perl'), true],
  ['curl', 'test/serve-port.test.ts runs the start-up key’s example command', () => onPath('curl'), true],
  [
    'postgresql',
    'the store tests on PostgreSQL (no server answers at OPTMARK_TEST_DATABASE_URL)',
    async () => (await postgresAnswers()) || postgresBinaries(),
    true,
  ],
  [
    'nginx-light',
    'test/site-signals.test.ts serves the nginx snippet (skipped without it)',
    () => executable('/usr/sbin/nginx') || executable('/usr/bin/nginx'),
    false,
  ],
];
if (long) {
  needs.push(['haproxy', 'test/long/multi-instance.test.ts (three servers behind HAProxy)', () => onPath('haproxy') || executable('/usr/sbin/haproxy'), true]);
  needs.push(['python3', 'test/long/dashboard-browser.test.ts reads the ZIP with Python’s zipfile', () => onPath('python3'), true]);
}

const missing = [];
for (const [pkg, why, present, required] of needs) if (!(await present())) missing.push([pkg, why, required]);
const list = (rows) => rows.map(([pkg, why]) => `  ${pkg}: ${why}`).join('\n');
if (missing.length > 0 && process.getuid?.() === 0 && onPath('apt-get')) {
  const names = missing.map(([pkg]) => pkg);
  process.stderr.write(`test setup: installing ${names.join(' ')} with apt-get\n${list(missing)}\n`);
  const apt = (...args) => spawnSync('apt-get', args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status === 0;
  if (!apt('update') || !apt('install', '-y', '--no-install-recommends', ...names)) {
    process.stderr.write(`test setup: apt-get could not install ${names.join(' ')}\n`);
    process.exit(1);
  }
} else if (missing.length > 0) {
  const required = missing.filter(([, , r]) => r);
  const optional = missing.filter(([, , r]) => !r);
  if (optional.length > 0)
    process.stderr.write(
      `test setup: not installed, so a case is skipped (install as root: apt-get install ${optional.map(([p]) => p).join(' ')}):\n${list(optional)}\n`,
    );
  if (required.length > 0) {
    const names = required.map(([pkg]) => pkg).join(' ');
    process.stderr.write(`the tests need Debian packages that are not installed:\n${list(required)}\ninstall them (as root): apt-get install ${names}\n`);
    process.exit(1);
  }
}
