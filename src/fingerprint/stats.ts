/**
 * Tail bounds for the decision. Both tests are exact under the key model (count cells carry
 * independent, sign-symmetric key material and the alignment was chosen without them), so neither
 * depends on the image's statistics.
 */

/** P(Bin(n, 1/2) >= k), computed in log space so that n up to thousands stays accurate. */
export function binomialTail(n: number, k: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  const lnHalfN = -n * Math.LN2;
  let lnTerm = lnChoose(n, k) + lnHalfN;
  let sum = 0;
  for (let i = k; i <= n; i++) {
    sum += Math.exp(lnTerm);
    lnTerm += Math.log((n - i) / (i + 1));
  }
  return Math.min(1, sum);
}

function lnChoose(n: number, k: number): number {
  return lnFactorial(n) - lnFactorial(k) - lnFactorial(n - k);
}

function lnFactorial(n: number): number {
  let s = 0;
  for (let i = 2; i <= n; i++) s += Math.log(i);
  return s;
}

/** Upper tail of the standard normal, Q(z) = P(Z >= z); erfc via Numerical Recipes' Chebyshev fit (rel. error < 1.2e-7). */
export function normalTail(z: number): number {
  const x = z / Math.SQRT2;
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const y =
    t *
    Math.exp(
      -x * x -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  const erfc = x >= 0 ? y : 2 - y;
  return erfc / 2;
}

/**
 * Pinelis (1994): for a Rademacher sum S = sum(e_i a_i) with sum(a_i^2) = 1, P(S >= t) <= (2e^3/9) Q(t).
 * Applied to T = sum(c_i) / sqrt(sum(c_i^2)) with independent sign-symmetric c_i (condition on |c_i|).
 */
export const PINELIS_CONSTANT = (2 * Math.exp(3)) / 9;

export function signFlipTail(t: number): number {
  if (!(t > 0)) return 1;
  return Math.min(1, PINELIS_CONSTANT * normalTail(t));
}

export interface CellTest {
  /** Cells counted. */
  n: number;
  /** Cells whose correlation has the key's sign. */
  k: number;
  /** Self-normalised correlation sum over the cells. */
  t: number;
  /** Bonferroni combination of the binomial and the sign-flip tails (two tests). */
  pValue: number;
}

/** Sign count and self-normalised sum over independent cell correlations; exact zeros count as misses. */
export function cellTest(cells: ArrayLike<number>): CellTest {
  let k = 0;
  let sum = 0;
  let sq = 0;
  for (let i = 0; i < cells.length; i++) {
    const c = cells[i]!;
    if (c > 0) k++;
    sum += c;
    sq += c * c;
  }
  const n = cells.length;
  const t = sq > 0 ? sum / Math.sqrt(sq) : 0;
  const p = Math.min(binomialTail(n, k), signFlipTail(t));
  return { n, k, t, pValue: Math.min(1, 2 * p) };
}
