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
 * The token a raw value names, tolerating what real files contain: the full URI, `https://` instead
 * of `http://`, surrounding white space, a bare token, and any letter case. Undefined for other values.
 */
export function tokenOf(raw: string): DataMiningToken | undefined {
  let v = raw.trim();
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
