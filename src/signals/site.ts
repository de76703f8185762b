/**
 * A site's own AI-use signals, from one policy URL (docs/signals.md): the files a crawler fetches before
 * any image (robots.txt, ai.txt, /.well-known/tdmrep.json) and the response headers a fetcher sees with
 * every image (X-Robots-Tag, TDMRep's tdm-reservation and tdm-policy, AIPREF's Content-Usage), as
 * snippets for nginx, Caddy and Apache. Pure text: nothing here touches the file system.
 *
 * Sources: robots.txt, RFC 9309; Content-Usage, IETF draft-ietf-aipref-attach (robots.txt rule and HTTP
 * header field) with the vocabulary of draft-ietf-aipref-vocab (`train-ai=n`: no training of AI models);
 * TDMRep, the W3C TDM Reservation Protocol final report (https://www.w3.org/community/reports/tdmrep/);
 * ai.txt, Spawning's format (https://site.spawning.ai/spawning-ai-txt); `noai, noimageai`, the
 * X-Robots-Tag values DeviantArt introduced and several image sites and crawlers adopted.
 */

/**
 * The crawlers that collect training data and name themselves in robots.txt, with the operator that
 * documents each token. The list follows the community-maintained ai.robots.txt project
 * (https://github.com/ai-robots-txt/ai.robots.txt), restricted to tokens whose operator publishes them
 * as a training or AI-product crawler; search crawlers (Googlebot, Bingbot, Applebot) are left alone.
 */
export const AI_CRAWLERS: readonly { agent: string; operator: string }[] = [
  { agent: 'GPTBot', operator: 'OpenAI' },
  { agent: 'ClaudeBot', operator: 'Anthropic' },
  { agent: 'anthropic-ai', operator: 'Anthropic' },
  { agent: 'CCBot', operator: 'Common Crawl' },
  { agent: 'Google-Extended', operator: 'Google (Gemini training; not Googlebot)' },
  { agent: 'Applebot-Extended', operator: 'Apple (training; not Applebot)' },
  { agent: 'PerplexityBot', operator: 'Perplexity' },
  { agent: 'Bytespider', operator: 'ByteDance' },
  { agent: 'meta-externalagent', operator: 'Meta' },
  { agent: 'FacebookBot', operator: 'Meta' },
  { agent: 'Amazonbot', operator: 'Amazon' },
  { agent: 'cohere-ai', operator: 'Cohere' },
  { agent: 'cohere-training-data-crawler', operator: 'Cohere' },
  { agent: 'AI2Bot', operator: 'Allen Institute for AI' },
  { agent: 'Diffbot', operator: 'Diffbot' },
  { agent: 'ImagesiftBot', operator: 'ImageSift' },
  { agent: 'Omgilibot', operator: 'Webz.io' },
  { agent: 'Timpibot', operator: 'Timpi' },
];

/** The AIPREF preference optmark states: no training of AI models (draft-ietf-aipref-vocab). */
export const CONTENT_USAGE = 'train-ai=n';
/** X-Robots-Tag directives against AI use of a page and of its images. */
export const X_ROBOTS_TAG = 'noai, noimageai';

/** Where each generated file goes, relative to the output folder. */
export const SITE_FILES = {
  robots: 'robots.txt',
  aiTxt: 'ai.txt',
  tdmrep: '.well-known/tdmrep.json',
  /**
   * The same file outside the dot-folder: shell globs (`cp out/* /var/www/`), many upload forms and
   * file listings skip dot-folders, and a file left behind there is a signal never served. Publish
   * either one at /.well-known/tdmrep.json.
   */
  tdmrepVisible: 'well-known/tdmrep.json',
  nginx: 'headers/nginx.conf',
  caddy: 'headers/Caddyfile',
  apache: 'headers/apache.conf',
} as const;

/** A policy URL that cannot be written into the files as it is. */
export class PolicyUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyUrlError';
  }
}

// Characters a URL may hold (RFC 3986) that are also safe inside a double-quoted nginx, Caddy or Apache
// value and a JSON string: `$` (nginx variables), `'`, `;`, `\` and quotes are not among them.
const SAFE_URL = /^[A-Za-z0-9\-._~:/?#[\]@!&()*+,=%]+$/;

/** The policy as written into the files: an absolute http(s) URL, normalised; throws PolicyUrlError. */
export function checkPolicyUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new PolicyUrlError(`--policy ${JSON.stringify(raw)} is not a URL; give the absolute address of the page that states your terms (https://...)`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new PolicyUrlError(`--policy must be an http or https URL, not ${url.protocol}`);
  const href = url.href;
  if (!SAFE_URL.test(href)) {
    throw new PolicyUrlError(
      `--policy ${href} holds characters (such as $ ' ; or non-ASCII) that server configurations would read as syntax; percent-encode them`,
    );
  }
  return href;
}

/** The headers every response should carry, in the order the snippets write them. */
export function signalHeaders(policy: string): [name: string, value: string][] {
  return [
    ['X-Robots-Tag', X_ROBOTS_TAG],
    ['tdm-reservation', '1'],
    ['tdm-policy', policy],
    ['Content-Usage', CONTENT_USAGE],
  ];
}

/** robots.txt: one group per AI crawler, disallowed everywhere, and the AIPREF rule for every crawler. */
export function robotsTxt(policy: string): string {
  const lines = [
    `# AI-use opt-out (optmark site-signals). Terms: ${policy}`,
    '# Merge these groups into an existing robots.txt; a crawler obeys the one group that names it best.',
    '',
  ];
  for (const { agent, operator } of AI_CRAWLERS) {
    lines.push(`# ${operator}`, `User-agent: ${agent}`, 'Disallow: /', `Content-Usage: ${CONTENT_USAGE}`, '');
  }
  lines.push('# Every other crawler (search included) may crawl, but not train AI models on what it fetches.', 'User-agent: *', 'Allow: /');
  lines.push(`Content-Usage: ${CONTENT_USAGE}`, '');
  return lines.join('\n');
}

/** ai.txt in Spawning's format: no file of this site for AI training datasets. */
export function aiTxt(policy: string): string {
  return [
    '# ai.txt (Spawning): no content of this site may be used in AI training datasets.',
    `# Terms: ${policy}`,
    '',
    'User-Agent: *',
    'Disallow: /',
    '',
  ].join('\n');
}

/** /.well-known/tdmrep.json (W3C TDMRep): rights reserved for the whole site, with the policy. */
export function tdmrepJson(policy: string): string {
  return `${JSON.stringify([{ location: '/', 'tdm-reservation': 1, 'tdm-policy': policy }], null, 2)}\n`;
}

/** An nginx snippet for a server (or location) block. */
export function nginxSnippet(policy: string): string {
  return [
    '# AI-use opt-out headers (optmark site-signals): include this in a server block.',
    '# nginx drops inherited add_header lines in a block that has its own: include it there too.',
    ...signalHeaders(policy).map(([name, value]) => `add_header ${name} "${value}" always;`),
    '',
  ].join('\n');
}

/** A Caddyfile snippet for a site block. */
export function caddySnippet(policy: string): string {
  return [
    '# AI-use opt-out headers (optmark site-signals): put this inside a site block.',
    'header {',
    ...signalHeaders(policy).map(([name, value]) => `\t${name} "${value}"`),
    '}',
    '',
  ].join('\n');
}

/** An Apache snippet (mod_headers) for the server config, a virtual host or .htaccess. */
export function apacheSnippet(policy: string): string {
  return [
    '# AI-use opt-out headers (optmark site-signals): needs mod_headers (a2enmod headers).',
    '<IfModule mod_headers.c>',
    ...signalHeaders(policy).map(([name, value]) => `\tHeader always set ${name} "${value}"`),
    '</IfModule>',
    '',
  ].join('\n');
}

/** Every file of the site's signals, by its path relative to the output folder. */
export function siteSignals(policy: string): Record<string, string> {
  return {
    [SITE_FILES.robots]: robotsTxt(policy),
    [SITE_FILES.aiTxt]: aiTxt(policy),
    [SITE_FILES.tdmrep]: tdmrepJson(policy),
    [SITE_FILES.tdmrepVisible]: tdmrepJson(policy),
    [SITE_FILES.nginx]: nginxSnippet(policy),
    [SITE_FILES.caddy]: caddySnippet(policy),
    [SITE_FILES.apache]: apacheSnippet(policy),
  };
}
