/**
 * The CAWG training-and-data-mining entries the Content Credentials layer writes, and the setting that
 * changes their uses (OPTMARK_C2PA_TRAINING_MINING). CAWG's Training and Data Mining assertion
 * (https://cawg.io/training-and-data-mining/) names four uses; each entry says `allowed`, `notAllowed` or
 * `constrained`. No imports: the settings table reads it.
 */

export const CAWG_ENTRIES = ['cawg.ai_generative_training', 'cawg.ai_inference', 'cawg.ai_training', 'cawg.data_mining'] as const;
export type CawgEntry = (typeof CAWG_ENTRIES)[number];
export const TRAINING_USES = ['notAllowed', 'constrained', 'allowed'] as const;
export type CawgUse = (typeof TRAINING_USES)[number];
export type TrainingMining = Record<CawgEntry, CawgUse>;

/** Every entry not allowed: the layer's default. */
export const NOT_ALLOWED: TrainingMining = Object.freeze(Object.fromEntries(CAWG_ENTRIES.map((e) => [e, 'notAllowed'])) as TrainingMining);

/**
 * `entry=use` pairs separated by commas (`ai_inference=allowed,data_mining=constrained`; the `cawg.`
 * prefix optional); entries not named stay `notAllowed`. Throws Error with a sentence naming what is wrong.
 */
export function parseTrainingMining(raw: string): TrainingMining {
  const out: TrainingMining = { ...NOT_ALLOWED };
  for (const part of raw.split(',')) {
    const pair = part.trim();
    if (pair === '') continue;
    const [name, use, extra] = pair.split('=').map((s) => s.trim());
    const entry = `cawg.${(name ?? '').replace(/^cawg\./, '')}` as CawgEntry;
    if (!CAWG_ENTRIES.includes(entry)) throw new Error(`unknown entry ${JSON.stringify(name)}; the entries are ${CAWG_ENTRIES.join(', ')}`);
    if (extra !== undefined || !(TRAINING_USES as readonly string[]).includes(use ?? '')) {
      throw new Error(`${JSON.stringify(pair)}: write ${entry}=${TRAINING_USES.join('|')}`);
    }
    out[entry] = use as CawgUse;
  }
  return out;
}
