/**
 * The PLUS DataMining vocabulary (IPTC Photo Metadata Standard 2023.1, `plus:DataMining`, a URI from
 * http://ns.useplus.org/ldf/vocab/). Which values mean "opted out" is decided here and only here.
 */
export const VOCAB_PREFIX = 'http://ns.useplus.org/ldf/vocab/';

export const DATA_MINING_TOKENS = {
  'DMI-UNSPECIFIED': false,
  'DMI-ALLOWED': false,
  'DMI-PROHIBITED-AIMLTRAINING': true,
  'DMI-PROHIBITED-GENAIMLTRAINING': true,
  'DMI-PROHIBITED-EXCEPTSEARCHENGINEINDEXING': true,
  'DMI-PROHIBITED': true,
  'DMI-PROHIBITED-SEECONSTRAINT': true,
  'DMI-PROHIBITED-SEEEMBEDDEDRIGHTSEXPR': true,
  'DMI-PROHIBITED-SEELINKEDRIGHTSEXPR': true,
} as const satisfies Record<string, boolean>;

export type DataMiningToken = keyof typeof DATA_MINING_TOKENS;

/** What protect writes by default. */
export const DEFAULT_TOKEN: DataMiningToken = 'DMI-PROHIBITED-AIMLTRAINING';

export function tokenUri(token: DataMiningToken): string {
  return VOCAB_PREFIX + token;
}

export function isToken(value: string): value is DataMiningToken {
  return Object.hasOwn(DATA_MINING_TOKENS, value);
}

/**
 * ExifTool's display strings for the tokens (Image/ExifTool/PLUS.pm, DataMining's PrintConv), lower
 * case. Tools that copy ExifTool's printed output into XMP write these instead of the URI.
 */
const DISPLAY_STRINGS = new Map<string, DataMiningToken>(
  Object.entries({
    'unspecified - no prohibition defined': 'DMI-UNSPECIFIED',
    allowed: 'DMI-ALLOWED',
    'prohibited for ai/ml training': 'DMI-PROHIBITED-AIMLTRAINING',
    'prohibited for generative ai/ml training': 'DMI-PROHIBITED-GENAIMLTRAINING',
    'prohibited except for search engine indexing': 'DMI-PROHIBITED-EXCEPTSEARCHENGINEINDEXING',
    prohibited: 'DMI-PROHIBITED',
    'prohibited, see plus:otherconstraints': 'DMI-PROHIBITED-SEECONSTRAINT',
    'prohibited, see iptcext:embdencrightsexpr': 'DMI-PROHIBITED-SEEEMBEDDEDRIGHTSEXPR',
    'prohibited, see iptcext:linkedencrightsexpr': 'DMI-PROHIBITED-SEELINKEDRIGHTSEXPR',
  } satisfies Record<string, DataMiningToken>),
);

/**
 * The token a raw value names, tolerating what real files contain: the full URI, `https://` instead
 * of `http://`, surrounding white space, a bare token, ExifTool's display string, and any letter case.
 * Undefined for other values.
 */
export function tokenOf(raw: string): DataMiningToken | undefined {
  let v = raw.trim();
  const shown = DISPLAY_STRINGS.get(v.toLowerCase().replace(/\s+/g, ' '));
  if (shown !== undefined) return shown;
  const lower = v.toLowerCase();
  for (const scheme of ['http://', 'https://']) {
    const prefix = scheme + VOCAB_PREFIX.slice('http://'.length);
    if (lower.startsWith(prefix)) {
      v = v.slice(prefix.length);
      break;
    }
  }
  const upper = v.toUpperCase();
  return isToken(upper) ? upper : undefined;
}

/** True when the value is one of the prohibiting tokens. Allowing, unspecified and unknown values are not. */
export function isOptOut(raw: string): boolean {
  const token = tokenOf(raw);
  return token !== undefined && DATA_MINING_TOKENS[token];
}
