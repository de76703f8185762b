// The configuration table: loading, `serve --help` and docs/configuration.md derive from it, and the
// document in the repository is the one the table generates.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, SETTINGS, configurationDoc, loadConfig, settingsHelp } from '../src/config.js';

describe('the configuration table', () => {
  it('docs/configuration.md is the document the table generates (run `npm run docs:config` after changing the table)', () => {
    expect(readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8')).toBe(configurationDoc());
  });

  it('declares each variable and each key once, and documents every one in --help and in the document', () => {
    expect(new Set(SETTINGS.map((s) => s.variable)).size).toBe(SETTINGS.length);
    expect(new Set(SETTINGS.map((s) => s.key)).size).toBe(SETTINGS.length);
    const help = settingsHelp();
    const doc = configurationDoc();
    for (const s of SETTINGS) {
      expect(help).toContain(`${s.variable}`);
      expect(help).toContain(s.doc);
      expect(doc).toContain(`| \`${s.variable}\` | ${s.shown.replace(/\|/g, '\\|')} | ${s.doc.replace(/\|/g, '\\|')} |`);
    }
    // Every Config field comes from the table.
    expect(Object.keys(loadConfig({})).sort()).toEqual(SETTINGS.map((s) => s.key).sort());
  });

  it('loads the defaults', () => {
    const cores = Math.max(1, availableParallelism());
    expect(loadConfig({})).toEqual({
      host: '0.0.0.0',
      port: 8080,
      reusePort: false,
      dataDir: resolve('./data'),
      maxUploadBytes: 26_214_400,
      maxPixels: 100_000_000,
      poolSize: cores,
      queueLength: cores * 8,
      maxInflightBytes: 384 * 1024 ** 2,
      warmInflightBytes: 32 * 1024 ** 2,
      minUploadBytesPerSecond: 32 * 1024,
      maxArrivingBytesPerAccount: 192 * 1024 ** 2,
      maxArrivingBytesPerAddress: 192 * 1024 ** 2,
      taskTimeoutMs: 30_000,
      workerMemoryLimitBytes: 512 * 1024 ** 2,
      shutdownTimeoutMs: 10_000,
      logLevel: 'info',
      allowUwsFallback: false,
      bootstrap: true,
      defaultProtectLimit: 10_000,
      defaultVerifyLimit: 50_000,
      signingKeyFile: undefined,
      fingerprintSecretFile: undefined,
      fingerprintTimeoutMs: 10_000,
      fingerprintDetect: true,
      c2paMode: 'update',
      c2paCertFile: undefined,
      c2paKeyFile: undefined,
      tdmPolicy: undefined,
      c2paTrainingMining: {
        'cawg.ai_generative_training': 'notAllowed',
        'cawg.ai_inference': 'notAllowed',
        'cawg.ai_training': 'notAllowed',
        'cawg.data_mining': 'notAllowed',
      },
      storeTimeoutMs: 5000,
      vaultLimitBytes: 10_000_000_000,
      vaultMasterKeyFile: undefined,
      vaultReconcileIntervalMs: 3_600_000,
      scanDailyLimit: 10,
      scanServiceDailyLimit: 250,
      scanMaxImages: 10_000,
      scanMaxBytes: 2 * 1024 ** 3,
      scanMaxWallMs: 30 * 60_000,
      scanMaxImageBytes: 25_000_000,
      scanMaxRedirects: 5,
      scanPerHostConcurrency: 4,
      scanPerHostDelayMs: 0,
      scanAllowNetworks: [],
      scanAllowLocal: false,
      scanClockOffsetMs: 0,
      vaultS3Region: 'us-east-1',
    });
  });

  it('OPTMARK_TDM_POLICY is an http(s) URL; OPTMARK_C2PA_TRAINING_MINING names entries and uses', () => {
    expect(loadConfig({ OPTMARK_TDM_POLICY: 'https://example.org/terms' }).tdmPolicy).toBe('https://example.org/terms');
    expect(() => loadConfig({ OPTMARK_TDM_POLICY: 'terms.html' })).toThrow(/^OPTMARK_TDM_POLICY: /);
    expect(loadConfig({ OPTMARK_C2PA_TRAINING_MINING: 'ai_inference=allowed' }).c2paTrainingMining['cawg.ai_inference']).toBe('allowed');
    expect(() => loadConfig({ OPTMARK_C2PA_TRAINING_MINING: 'ai_inference=yes' })).toThrow(/^OPTMARK_C2PA_TRAINING_MINING: /);
  });

  it('OPTMARK_C2PA takes update, refuse or invalidate; the chain and key files are paths', () => {
    expect(loadConfig({ OPTMARK_C2PA: 'refuse' }).c2paMode).toBe('refuse');
    expect(loadConfig({ OPTMARK_C2PA: 'Invalidate' }).c2paMode).toBe('invalidate');
    expect(() => loadConfig({ OPTMARK_C2PA: 'strip' })).toThrow(/OPTMARK_C2PA: expected one of update, refuse, invalidate, got "strip"/);
    expect(loadConfig({ OPTMARK_C2PA_CERT_FILE: '/c.pem', OPTMARK_C2PA_KEY_FILE: '/k.pem' })).toMatchObject({ c2paCertFile: '/c.pem', c2paKeyFile: '/k.pem' });
  });

  it('the per-client shares of arriving bodies: 0 switches one off; below one largest upload is refused', () => {
    expect(loadConfig({ OPTMARK_MAX_ARRIVING_BYTES_PER_ADDRESS: '0' }).maxArrivingBytesPerAddress).toBe(0);
    expect(() => loadConfig({ OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT: String(40 * 1024 ** 2) })).toThrow(
      /OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT: must be 0 \(no limit\) or at least \d+: one largest upload plus its answer/,
    );
  });

  it('parses values, and defaults that follow earlier settings follow them', () => {
    const c = loadConfig({
      OPTMARK_POOL_SIZE: ' 3 ',
      OPTMARK_MAX_UPLOAD_BYTES: String(200 * 1024 ** 2),
      OPTMARK_LOG_LEVEL: 'WARN',
      OPTMARK_BOOTSTRAP: 'off',
      OPTMARK_REUSE_PORT: 'yes',
      OPTMARK_SIGNING_KEY_FILE: 'keys/k.pem',
      OPTMARK_DATA_DIR: '',
    });
    expect(c).toMatchObject({ poolSize: 3, queueLength: 24, maxInflightBytes: 800 * 1024 ** 2, logLevel: 'warn', bootstrap: false, reusePort: true });
    expect(c.signingKeyFile).toBe(resolve('keys/k.pem'));
    expect(c.dataDir).toBe(resolve('./data'));
    expect(loadConfig({ OPTMARK_MAX_INFLIGHT_BYTES: String(16 * 1024 ** 2), OPTMARK_MAX_UPLOAD_BYTES: String(1024 ** 2) }).warmInflightBytes).toBe(
      16 * 1024 ** 2,
    );
  });

  it.each([
    ['OPTMARK_PORT', '80a', /OPTMARK_PORT: expected a whole number/],
    ['OPTMARK_PORT', '70000', /OPTMARK_PORT: must be between 0 and 65535/],
    ['OPTMARK_BOOTSTRAP', 'maybe', /OPTMARK_BOOTSTRAP: expected on\/off/],
    ['OPTMARK_LOG_LEVEL', 'loud', /OPTMARK_LOG_LEVEL: expected one of/],
    ['OPTMARK_HOST', 'a b', /OPTMARK_HOST: not a host name/],
    ['OPTMARK_MAX_INFLIGHT_BYTES', '4096', /OPTMARK_MAX_INFLIGHT_BYTES: must be at least \d+/],
    ['OPTMARK_WARM_INFLIGHT_BYTES', String(385 * 1024 ** 2), /OPTMARK_WARM_INFLIGHT_BYTES: must be between 0 and 402653184/],
  ])('refuses %s=%s, naming the variable', (variable, value, message) => {
    let err: unknown;
    try {
      loadConfig({ [variable]: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe(variable);
    expect((err as Error).message).toMatch(message);
  });
});
